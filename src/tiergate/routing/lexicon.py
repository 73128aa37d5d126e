"""The lexical vocabularies of the difficulty score, and counting them in a text.

Three counts per text feed routing.difficulty's features: reasoning cues, code
markers (keywords, identifier shapes, syntax) and math markers (symbols,
words). The vocabularies are the report's feature definitions (do not retune
without re-running replay); the scanning machinery below only makes counting
them cheap, with results identical to the plain regexes
(tests/test_scan_equivalence.py). No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# ---- vocabularies --------------------------------------------------------------------

REASONING_CUES: tuple[str, ...] = (
    r"why",
    r"how come",
    r"explain\w*",
    r"reason(?:s|ing)? about",
    r"analy[sz]\w*",
    r"prove[sn]?",
    r"proofs?",
    r"justif\w+",
    r"deriv(?:e|es|ed|ation)",
    r"trade-?offs?",
    r"pros and cons",
    r"compar(?:e|es|ing|ison)",
    r"step[- ]by[- ]step",
    r"root[- ]cause",
    r"investigat\w+",
    r"diagnos\w+",
    r"invariants?",
    r"preconditions?",
    r"postconditions?",
    r"edge cases?",
    r"corner cases?",
    r"race conditions?",
    r"data races?",
    r"deadlock\w*",
    r"livelock\w*",
    r"concurren\w+",
    r"thread[- ]safe\w*",
    r"atomic(?:ally|ity)?",
    r"memory (?:model|ordering)",
    r"complexity",
    r"worst[- ]case",
    r"correctness",
    r"soundness",
    r"guarantee[sd]?",
    r"nondeterministic\w*",
    r"non-deterministic\w*",
    r"intermittent\w*",
    r"flaky",
    r"bottlenecks?",
    r"scalab\w+",
    r"architect\w*",
    r"hypothes[ie]s",
    r"assumptions?",
    r"implications?",
    r"counter-?examples?",
    r"therefore",
    r"hence",
    r"consequently",
    r"what if",
    r"rigorous\w*",
)
"""Reasoning cues (case-insensitive, whole words): words that ask for or carry
analysis rather than a mechanical edit. Four families: asking for explanation or
argument (why, explain, prove, justify, derive, compare, trade-off, step by step);
diagnosis (root cause, investigate, diagnose, hypothesis, flaky, intermittent);
correctness and concurrency (invariant, pre/postcondition, edge case, race
condition, deadlock, atomicity, memory ordering, guarantee, soundness); and design
or performance reasoning (complexity, worst case, bottleneck, scalability,
architecture, implications) plus argumentative connectives (therefore, hence,
consequently, what if). Everyday connectives such as "because" are deliberately
absent: they occur in trivial requests as often as in hard ones."""

CODE_KEYWORDS: tuple[str, ...] = (
    # Python
    "def", "elif", "lambda", "None", "True", "False", "self", "cls", "kwargs", "isinstance",
    "async", "await", "yield", "except", "finally", "raise", "nonlocal",
    # JavaScript / TypeScript
    "const", "var", "function", "undefined", "null", "typeof", "instanceof", "console",
    "require",
    # Go
    "func", "chan", "defer", "nil", "struct", "err", "fmt",
    # Rust
    "fn", "impl", "mut", "pub", "crate", "usize", "unwrap", "Some", "Ok", "Err", "Vec",
    # C / C++
    "nullptr", "NULL", "void", "int", "char", "unsigned", "sizeof", "typedef", "std",
    "namespace", "template",
    # Java / C#
    "public", "private", "protected", "static", "extends", "implements", "throws",
    "boolean", "String",
    # shared statements
    "return", "import", "else", "true", "false", "bool", "float",
    # SQL (upper case only)
    "SELECT", "WHERE", "JOIN", "INSERT", "UPDATE", "DELETE",
    # failure reports
    "Traceback", "goroutine", "panic", "panicked",
)  # fmt: skip
"""Reserved words and core identifiers of Python, JavaScript/TypeScript, Go, Rust,
C/C++, Java/C# and SQL, plus the headers of Python tracebacks and Go/Rust panics
(case-sensitive, whole words). Words that are ordinary English first (if, for,
while, new, this, case, match, let) are left out: they would make prose look like
code. The few kept (return, import, static, else) are rare enough in requests that
prose stays below ~0.5 matches per 100 chars."""

CODE_IDENTIFIER_SHAPES: tuple[str, ...] = (
    r"[A-Za-z_]\w*+(?:\(|\.[A-Za-z_]\w*+(?!:\d))",  # call sites foo( and qualified os.path
    r"[a-z][a-z0-9]*+(?:_[a-z0-9]++)+\b",  # snake_case
    r"[a-z]++(?:[A-Z][a-z0-9]*+)+\b",  # camelCase
    r"[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)+\b",  # SCREAMING_CASE
)
"""Identifier shapes that prose does not use: call sites, qualified names (a
trailing file:line is left to CODE_SYNTAX) and snake/camel/SCREAMING casing.
Matched at word starts, in one scan with CODE_KEYWORDS (keywords win)."""

CODE_SYNTAX: tuple[str, ...] = (
    r"#include\b|#define\b|#!/",
    r"__\w+__",  # dunder names
    r"0x(?<!\w0x)[0-9a-fA-F]+\b",  # addresses and hex literals (dumps, panics)
    r"\.[A-Za-z]{1,5}:\d+",  # file:line (server.go:142, app.py:12)
    r"line (?<!\wline )\d+",  # Python traceback frames
    r"\n[ \t]+at\b",  # Java / JS / .NET frame marker (the frame's name counts as qualified)
    r"(?:Error|Exception)\b",  # exception class names: ValueError, IOException
    r"==|!=|<=|>=|->|=>|::|:=|&&|\|\||\+=|-=|<<|>>",  # operators prose never uses
    r"[{}]",
    r";[ \t]*$",  # statement terminators
)
"""Code punctuation and stack-trace structure that survives any language:
operators, braces, statement terminators, dunders, hex addresses, file:line
references and frame markers. Each pattern starts with a literal, so it is
scanned on its own with the regex engine's fast literal search.

Why structure counts at all: keyword-only counting saturates far below the
5-per-100-chars cap on real code (report §7 measured 1.72). Counting structure as
well, 3 KB samples of real source measured medians of 3.3 (Python stdlib,
docstrings included), 4.5 (JavaScript), 4.9 (C headers) and about 7 (Go), while
licence texts and READMEs measured 0.05 to 0.3: the term now separates a pasted
trace or source excerpt from prose instead of being decorative."""

MATH_SYMBOLS: tuple[str, ...] = (
    r"\$\$|\\\(|\\\[",  # LaTeX display / inline delimiters
    r"\\(?:frac|dfrac|sum|prod|int|oint|sqrt|lim|infty|partial|nabla|forall|exists"
    r"|in|notin|subseteq?|cup|cap|leq?|geq?|neq|approx|equiv|cdot|times|pm|mod|pmod|binom"
    r"|lfloor|rfloor|lceil|rceil|mathbb|mathcal|alpha|beta|gamma|delta|epsilon|theta"
    r"|lambda|mu|sigma|pi|phi|omega|Theta|Omega|Sigma|Delta|log|ln|exp|begin\{"
    r"(?:equation|align|proof|theorem|lemma)\*?\})\b",
    r"[∑∏∫∮√∞≤≥≠≈≡∀∃∈∉⊂⊆⊃⊇∪∩∧∨¬⇒⇔↦∂∇±×÷⌊⌋⌈⌉∎ℝℕℤℚℂ]",  # noqa: RUF001 (math symbols)
    r"\((?<=\b[OΘΩoω]\()[^()\n]{1,24}\)",  # asymptotic notation: O(n log n), Θ(1)
    r"\^(?<=\b\w\^)\{?[\w+\-]",  # exponents on a one-character base: n^2, 2^{k+1}
    r"_\{(?<=\b\w_\{)\w+\}",  # LaTeX subscripts: x_{i}
)
"""Mathematical notation: LaTeX commands and delimiters, Unicode operators
(∑ ∫ √ ≤ ≠ ∀ ∈ ⇒ ...), asymptotic notation (O(n log n), Θ(1)), exponents and
subscripts. Bare Greek letters are not counted, so text written in Greek does not
read as mathematics; ASCII comparison operators count as code, and `a ^ b` (XOR,
spaced) is not an exponent."""

MATH_WORDS: tuple[str, ...] = (
    r"big-?o", r"theorems?", r"lemmas?", r"corollar(?:y|ies)",
    r"by induction", r"inductive step", r"base case", r"q\.e\.d", r"qed", r"iff",
    r"modulo", r"probabilit(?:y|ies)", r"expected value", r"variance", r"integrals?",
    r"derivatives?", r"eigen\w+", r"matri(?:x|ces)", r"polynomials?", r"logarithm\w*",
    r"exponential\w*", r"recurrences?", r"asymptotic\w*", r"amortized", r"bijecti\w+",
    r"injective", r"surjective", r"convex\w*", r"divisible", r"factorials?",
    r"permutations?", r"combinatori\w+", r"pigeonhole", r"upper bound", r"lower bound",
)  # fmt: skip
"""The words of proofs and analysis (case-insensitive, whole words): theorem,
lemma, by induction, amortized, recurrence, upper bound, probability, ... Counted
with MATH_SYMBOLS as MathMarkerCount. "O(n log n)" counts once, as notation."""


def _alternation(patterns: Iterable[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def _by_first_letter(patterns: Iterable[str]) -> str:
    """An alternation grouped by each pattern's literal first letter.

    Same language as the plain alternation (order within a letter is kept), but
    the engine tests one letter per position instead of trying every pattern.
    Patterns that do not start with a plain letter stay ungrouped, at the end.
    """
    groups: dict[str, list[str]] = {}
    rest: list[str] = []
    for p in patterns:
        if p[:1].isalpha() and p[1:2] not in ("?", "*", "+", "{"):
            groups.setdefault(p[0], []).append(p[1:])
        else:
            rest.append(p)
    branches = [f"{re.escape(ch)}(?:{_alternation(tails)})" for ch, tails in groups.items()]
    return _alternation([*branches, *rest])


def _trie_regex(words: Iterable[str]) -> str:
    """An alternation of literal words factored by common prefix.

    Python's regex engine tries alternatives one by one; a prefix tree makes a
    failed keyword test cost a character or two instead of one try per keyword.
    """
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


# ---- scanning ------------------------------------------------------------------------
#
# Every count is what `len(pattern.findall(text))` gives for the plain patterns (a
# word pattern is `\b(?=[a-z])(?:<vocabulary>)\b`), computed with less engine work;
# tests/test_scan_equivalence.py checks it against a frozen copy of the plain scan:
#
# - Reasoning cues and math words run on a lower-cased copy of the text:
#   case-folding once is several times cheaper than IGNORECASE matching.
# - ASCII mode. Python's Unicode `\w` and `\b` cost a Unicode-database lookup per
#   character; with re.ASCII they are a table lookup. The two modes differ only on
#   non-ASCII word characters (letters, digits), so a text without any is scanned
#   with ASCII-mode patterns: same matches, about half the time.
# - One screen for cues and math words: both vocabularies scan every word start,
#   and in tool output they rarely match. One pass over the merged vocabulary
#   lists the words where either matches; sparse hits are attributed one by one
#   (see _cue_and_math_word_counts), so a text with few or none costs one pass
#   instead of two.
# - Code words: a lowercase word followed by neither a word character, `(` nor
#   `.` (most words of prose and of much tool output) is tested against the
#   keywords only; casing shapes (snake_case, camelCase, SCREAMING_CASE) are
#   tried only when the word has, after its first letter and any lowercase
#   letters or digits, a `_` or a capital, which every casing shape needs.
# - Syntax and symbol patterns are skipped when no character their matches
#   need occurs in the text (a memchr each).
# - Literal counts: `[{}]` and `$$|\(|\[` are counted with str.count (their
#   matches cannot overlap one another), the latter only when `$` or `\` occurs;
#   the Unicode math-symbol class is skipped on ASCII text.


def _word_pattern(vocabulary: Iterable[str]) -> str:
    return r"\b(?=[a-z])(?:" + _by_first_letter(vocabulary) + r")\b"


_CASING_GATE = r"(?=[A-Za-z_][a-z0-9]*+[_A-Z])"
"""Necessary for every CODE_IDENTIFIER_SHAPES casing (all but the first, call-site shape)."""
_PLAIN_WORD_GATE = r"(?![a-z]*+[^\w(.])"
"""A lowercase word followed by neither a word character, `(` nor `.` can only be a
keyword: no call site, qualified name or casing shape starts there."""
_CODE_WORD = (
    r"\b(?=[A-Za-z_])(?:"
    + _trie_regex(CODE_KEYWORDS)
    + r"\b|"
    + _PLAIN_WORD_GATE
    + "(?:"
    + _alternation(CODE_IDENTIFIER_SHAPES[:1])
    + "|"
    + _CASING_GATE
    + "(?:"
    + _alternation(CODE_IDENTIFIER_SHAPES[1:])
    + ")))"
)

_COUNTED_LITERALS: dict[str, tuple[str, ...]] = {
    r"[{}]": ("{", "}"),
    r"\$\$|\\\(|\\\[": ("$$", "\\(", "\\["),
}
"""Patterns whose matches are exactly the non-overlapping occurrences of these
literals, none of which can overlap another: counted with str.count."""

_REQUIRED_CHARS: dict[str, str] = {
    r"#include\b|#define\b|#!/": "#",
    r"__\w+__": "_",
    r"0x(?<!\w0x)[0-9a-fA-F]+\b": "x",
    r"\.[A-Za-z]{1,5}:\d+": ":",
    r"\n[ \t]+at\b": "\n",
    r"(?:Error|Exception)\b": "E",
    r"==|!=|<=|>=|->|=>|::|:=|&&|\|\||\+=|-=|<<|>>": "=<>:&|",
    r";[ \t]*$": ";",
    r"\((?<=\b[OΘΩoω]\()[^()\n]{1,24}\)": "(",
    r"\^(?<=\b\w\^)\{?[\w+\-]": "^",
    r"_\{(?<=\b\w_\{)\w+\}": "{",
}
"""Pattern -> characters one of which every match contains: the pattern is not run
on a text without any (a memchr each, instead of a regex call). Keyed by the exact
pattern text, so an edited pattern simply loses its shortcut."""
_REQUIRED_CHARS.update(  # the LaTeX commands: a backslash, then one group
    {p: "\\" for p in MATH_SYMBOLS if p.startswith(r"\\(?:frac|") and p.endswith(r")\b")}
)


def _non_ascii_class(pattern: str) -> bool:
    """A single character class of non-ASCII characters only (matches nothing in ASCII)."""
    body = pattern[1:-1]
    return (
        pattern[:1] == "["
        and pattern[-1:] == "]"
        and body[:1] != "^"
        and all(ord(c) > 127 for c in body)
    )


_Counted = tuple[str, re.Pattern[str]]
"""(characters one of which a match needs, or "" for none known; pattern)."""


@dataclass(frozen=True, slots=True)
class _Patterns:
    """The scanner's patterns, compiled in one regex mode (Unicode or ASCII)."""

    cue: re.Pattern[str]
    math_word: re.Pattern[str]
    cue_or_math_word: re.Pattern[str]
    cue_here: re.Pattern[str]
    math_word_here: re.Pattern[str]
    inner_word_start: re.Pattern[str]
    code_word: re.Pattern[str]
    code_syntax: tuple[_Counted, ...]
    math_symbols: tuple[_Counted, ...]
    non_ascii_symbols: tuple[re.Pattern[str], ...]


def _compile(flags: int) -> _Patterns:
    cue, math_word = _word_pattern(REASONING_CUES), _word_pattern(MATH_WORDS)
    symbols = [p for p in MATH_SYMBOLS if p not in _COUNTED_LITERALS]
    return _Patterns(
        cue=re.compile(cue, flags),
        math_word=re.compile(math_word, flags),
        cue_or_math_word=re.compile(_word_pattern((*REASONING_CUES, *MATH_WORDS)), flags),
        cue_here=re.compile(f"(?:{_by_first_letter(REASONING_CUES)})\\b", flags),
        math_word_here=re.compile(f"(?:{_by_first_letter(MATH_WORDS)})\\b", flags),
        inner_word_start=re.compile(r"\W+(?=[a-z])", flags),
        code_word=re.compile(_CODE_WORD, flags),
        code_syntax=tuple(
            (_REQUIRED_CHARS.get(p, ""), re.compile(p, flags | re.MULTILINE))
            for p in CODE_SYNTAX
            if p not in _COUNTED_LITERALS
        ),
        math_symbols=tuple(
            (_REQUIRED_CHARS.get(p, ""), re.compile(p, flags))
            for p in symbols
            if not _non_ascii_class(p)
        ),
        non_ascii_symbols=tuple(re.compile(p, flags) for p in symbols if _non_ascii_class(p)),
    )


def _count_matches(text: str, counted: tuple[_Counted, ...]) -> int:
    n = 0
    for needs, pattern in counted:
        if needs:
            for c in needs:
                if c in text:
                    break
            else:
                continue  # no character a match needs: no match
        n += len(pattern.findall(text))
    return n


_UNICODE_MODE = _compile(0)
_ASCII_MODE = _compile(re.ASCII)
_NON_ASCII_WORD_CHAR = re.compile(r"[^\x00-\x7f\W]")
_SYNTAX_LITERALS = tuple(s for p in CODE_SYNTAX for s in _COUNTED_LITERALS.get(p, ()))
_SYMBOL_LITERALS = tuple(s for p in MATH_SYMBOLS for s in _COUNTED_LITERALS.get(p, ()))


_ASCII_BYTES = bytes(range(128))


def _mode(non_ascii: str) -> _Patterns:
    """ASCII mode unless these characters include a (non-ASCII) word character."""
    return _ASCII_MODE if _NON_ASCII_WORD_CHAR.search(non_ascii) is None else _UNICODE_MODE


def _lower_and_modes(text: str) -> tuple[str, _Patterns, _Patterns]:
    """text.lower(), and the regex modes for the text and for its lowered copy.

    Non-ASCII text is handled through its UTF-8 bytes: dropping the ASCII bytes
    leaves its non-ASCII characters, a short string to check for word characters
    (only they make the modes differ), and when those characters are caseless,
    lowering the bytes lowers the text; both are C loops, several times cheaper
    than a regex search or str.lower over a non-ASCII string. Lowering maps each
    character on its own (bar a final sigma, a letter either way), so the lowered
    text's non-ASCII characters are among those of the lowered non-ASCII ones.
    """
    if text.isascii():
        return text.lower(), _ASCII_MODE, _ASCII_MODE
    raw = text.encode("utf-8", "surrogatepass")
    non_ascii = raw.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
    non_ascii_lowered = non_ascii.lower()
    if non_ascii_lowered == non_ascii:
        lowered = raw.lower().decode("utf-8", "surrogatepass")
    else:
        lowered = text.lower()
    return lowered, _mode(non_ascii), _mode(non_ascii_lowered)


def _count_literals(text: str, literals: tuple[str, ...]) -> int:
    n = 0
    for s in literals:
        if s[0] in text:  # a memchr, cheaper than counting a literal that is absent
            n += text.count(s)
    return n


HIT_SPACING = 256
"""A text gets one screen hit per this many characters counted hit by hit; past
that it is counted with a pass per vocabulary (see _cue_and_math_word_counts)."""


def _cue_and_math_word_counts(lowered: str, mode: _Patterns) -> tuple[int, int]:
    """(cue matches, math-word matches): what each vocabulary's own findall counts.

    The merged screen lists words where either vocabulary matches (a cue where
    both could, with the cue's span: cue alternatives come first). Each hit is
    attributed to its vocabulary, which is exact while the other vocabulary's
    scan would find nothing the screen skipped: no match of it at the hit itself
    nor at a word start inside the hit's span ("race condition" spans the word
    "condition"). At the first hit where that fails, or once the text has had
    one hit per HIT_SPACING characters (dense hits are cheaper counted per
    vocabulary), each vocabulary is counted with its own pass from that hit on:
    neither scan has a match pending before it.
    """
    cues = math_words = 0
    budget = len(lowered) // HIT_SPACING
    for hit in mode.cue_or_math_word.finditer(lowered):
        start, end = hit.span()
        if budget == 0:
            break
        budget -= 1
        is_cue = mode.cue_here.match(lowered, start) is not None
        other = mode.math_word_here if is_cue else mode.cue_here
        if is_cue and other.match(lowered, start) is not None:
            break
        if any(
            other.match(lowered, inner.end()) is not None
            for inner in mode.inner_word_start.finditer(lowered, start, end)
        ):
            break
        if is_cue:
            cues += 1
        else:
            math_words += 1
    else:
        return cues, math_words
    return (
        cues + len(mode.cue.findall(lowered, start)),
        math_words + len(mode.math_word.findall(lowered, start)),
    )


def _code_count(text: str, mode: _Patterns) -> int:
    return (
        len(mode.code_word.findall(text))
        + _count_matches(text, mode.code_syntax)
        + _count_literals(text, _SYNTAX_LITERALS)
    )


def _math_symbol_count(text: str, mode: _Patterns) -> int:
    count = _count_matches(text, mode.math_symbols)
    if not text.isascii():
        count += sum(len(r.findall(text)) for r in mode.non_ascii_symbols)
    return count + _count_literals(text, _SYMBOL_LITERALS)


def reasoning_cue_count(text: str) -> int:
    lowered, _, lowered_mode = _lower_and_modes(text)
    return _cue_and_math_word_counts(lowered, lowered_mode)[0]


def code_keyword_count(text: str) -> int:
    """CodeKeywordDensity's numerator: keyword and identifier matches plus syntax."""
    return _code_count(text, _lower_and_modes(text)[1])


def math_marker_count(text: str) -> int:
    lowered, mode, lowered_mode = _lower_and_modes(text)
    return _math_symbol_count(text, mode) + _cue_and_math_word_counts(lowered, lowered_mode)[1]


def lexical_counts(text: str) -> tuple[int, int, int]:
    """(reasoning cues, code markers, math markers) of one text, in one set of passes."""
    lowered, mode, lowered_mode = _lower_and_modes(text)
    cues, math_words = _cue_and_math_word_counts(lowered, lowered_mode)
    return cues, _code_count(text, mode), _math_symbol_count(text, mode) + math_words
