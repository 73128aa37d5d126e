"""Each simulated model's context window, enforced as the real providers do.

Why: the simulator used to accept any prompt length, so a 200,000-word prompt to
a concrete model returned 200 and the gateway's path for a provider's
"context length exceeded" 400 was never exercised. Real providers refuse such a
request before processing it, each in its own words:

- OpenAI (and DeepSeek): 400 `invalid_request_error`, code
  `context_length_exceeded`, "This model's maximum context length is N tokens...";
- Anthropic: 400 `invalid_request_error`, "prompt is too long: P tokens > N
  maximum" (or "input length and `max_tokens` exceed context limit" when only
  the reserved output pushes it over);
- Gemini: 400 `INVALID_ARGUMENT`, "The input token count (P) exceeds the maximum
  number of tokens allowed (N)."

Windows are the providers' published totals (input plus the requested output;
Gemini's counts the input alone). A model the table does not know is not
limited, as before.
"""

from __future__ import annotations

from tiergate.sim.prompt import SimCall

CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "claude-opus-4-6": 200_000,
    "claude-sonnet-4-6": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-sonnet-4-5": 200_000,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
}

#: OpenAI's error code, which the gateway also answers with (gateway/failures.py).
CODE = "context_length_exceeded"


def context_error(call: SimCall, prompt_tokens: int) -> tuple[str, str | None] | None:
    """(message, code) of the provider's 400 when the prompt, plus the output the
    request reserves (`max_tokens`), does not fit the model's window; else None."""
    window = CONTEXT_WINDOWS.get(call.model)
    if window is None:
        return None
    output = call.max_tokens or 0
    if call.provider == "gemini":  # Gemini limits the input alone
        output = 0
    if prompt_tokens + output <= window:
        return None
    if call.provider == "anthropic":
        if prompt_tokens > window:
            return f"prompt is too long: {prompt_tokens} tokens > {window} maximum", None
        return (
            "input length and `max_tokens` exceed context limit: "
            f"{prompt_tokens} + {output} > {window}, decrease input length or "
            "`max_tokens` and try again",
            None,
        )
    if call.provider == "gemini":
        return (
            f"The input token count ({prompt_tokens}) exceeds the maximum number "
            f"of tokens allowed ({window}).",
            None,
        )
    if output:
        asked = (
            f"However, you requested {prompt_tokens + output} tokens ({prompt_tokens} in "
            f"the messages, {output} in the completion). Please reduce the length of the "
            "messages or completion."
        )
    else:
        asked = (
            f"However, your messages resulted in {prompt_tokens} tokens. Please reduce "
            "the length of the messages."
        )
    return f"This model's maximum context length is {window} tokens. {asked}", CODE
