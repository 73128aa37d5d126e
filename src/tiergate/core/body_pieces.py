"""An upstream request body as the HTTP client takes it: whole, or in pieces.

Why a module of its own: the body-encode memo (formats/body_encode.py) hands
the upstream client (providers/client.py, providers/exchange.py) a long
conversation's kept bytes as pieces for one vectored write, instead of joining
them into a new buffer every turn (issue #30). Both sides name the type here,
below formats and providers.
"""

from __future__ import annotations

from collections.abc import Sequence

#: A piece of a body: bytes, or a view into bytes a memo keeps.
BodyPiece = bytes | memoryview
#: A request body: one bytes object, or pieces that join to it.
UpstreamBody = bytes | Sequence[BodyPiece]
