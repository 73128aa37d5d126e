"""An upstream request body as the HTTP client takes it: whole, or in pieces.

Why a module of its own: the body-encode memo (formats/body_encode.py) hands
the upstream client (providers/client.py, providers/exchange.py) a long
conversation's kept bytes as pieces for one vectored write, instead of joining
them into a new buffer every turn (issue #30). Both sides name the type here,
below formats and providers. The decode memo (formats/body_decode.py) reads an
inbound body in the pieces it arrived in; `spans` walks either kind, and
`joined` makes one bytes object of them for whoever needs it whole.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import TypeVar

#: A piece of a body: bytes, or a view into bytes a memo keeps.
BodyPiece = bytes | memoryview
#: A request body: one bytes object, or pieces that join to it.
UpstreamBody = bytes | Sequence[BodyPiece]


_Piece = TypeVar("_Piece", bound=BodyPiece)


def spans(
    pieces: Sequence[_Piece], starts: Sequence[int], begin: int, end: int
) -> Iterator[tuple[_Piece, int, int]]:
    """(piece, from, to) covering bytes `begin`..`end` of `pieces` laid end to end,
    piece k at offset `starts[k]`, in order."""
    i = bisect_right(starts, begin) - 1
    while begin < end:
        piece = pieces[i]
        at = begin - starts[i]
        take = min(len(piece) - at, end - begin)
        yield piece, at, at + take
        begin += take
        i += 1


def joined(parts: Sequence[bytes]) -> bytes:
    """The pieces as one bytes object: a body that came in one piece is that
    piece, not a copy."""
    return parts[0] if len(parts) == 1 else b"".join(parts)
