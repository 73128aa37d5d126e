"""A budget's worst-case prompt size, with the history's share remembered per
conversation (gateway/prompt_parts.py `prompt_size`), equals the plain walk."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.model import ChatRequest, ImagePart, Message, RawBlock, TextPart, ToolCall
from tiergate.gateway.prompt_parts import fixed_tokens, prompt_size, prompt_texts

_text = st.text(max_size=8)
_part = st.one_of(
    st.builds(TextPart, _text),
    st.builds(ImagePart, st.just("https://x/y.png")),
    st.builds(RawBlock, st.fixed_dictionaries({"type": st.just("document"), "n": _text})),
)
_message = st.builds(
    Message,
    st.sampled_from(["user", "assistant", "tool"]),
    st.lists(_part, max_size=3),
    tool_calls=st.lists(st.builds(ToolCall, st.just("c1"), _text, _text), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_message, min_size=1, max_size=4), st.data())
def test_prompt_size_equals_the_walk_turn_after_turn(first: list[Any], data: Any) -> None:
    history = list(first)
    for _ in range(data.draw(st.integers(1, 6))):
        action = data.draw(st.sampled_from(["append", "append", "edit", "drop"]))
        if action == "append" or len(history) < 2:
            history += data.draw(st.lists(_message, min_size=1, max_size=2))
        elif action == "edit":  # a new object in place of an old one
            history[data.draw(st.integers(0, len(history) - 1))] = data.draw(_message)
        else:
            del history[data.draw(st.integers(1, len(history) - 1))]
        req = ChatRequest(model="m", messages=list(history), system=[TextPart("sys")])
        chars = sum(len(t) for t in prompt_texts(req))
        assert prompt_size(req) == (chars, fixed_tokens(req))
