"""Helpers shared by the request-level harnesses: where the data lives, how a prompt
becomes a request for the real router, and how results become tables and figures.

The harnesses never re-implement routing. A prompt becomes a neutral ChatRequest
with one user message, a benchmark's models become `strategies.Candidate`s, and
every pick comes from `strategies.rank`, the function the gateway itself calls.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson
from tqdm import tqdm

from tiergate.config import ModelConfig, Price, RouterConfig, Thresholds
from tiergate.core.model import ChatRequest, Message, TextPart
from tiergate.routing import strategies
from tiergate.routing.strategies import Candidate, StrategyContext

log = logging.getLogger(__name__)

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[1]

OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "grey": "#999999",
}
"""Okabe & Ito's colour-blind-safe palette (plus grey). Figures also vary marker and
line style, so no series is told apart by colour alone."""


class DataMissingError(RuntimeError):
    """A benchmark's data directory or one of its files is absent."""


def default_data_dir() -> Path:
    """`shared/data` beside the repository (from /work/main: /work/shared/data).

    Resolved from this file, not the working directory, so a clone anywhere with
    `shared/` copied next to it finds its data.
    """
    return REPO_ROOT.parent / "shared" / "data"


def require_dir(data_dir: Path, name: str, must_contain: Sequence[str] = ()) -> Path:
    """`data_dir / name`, or DataMissingError saying exactly what is missing."""
    path = data_dir / name
    if not path.is_dir():
        raise DataMissingError(
            f"benchmark data not found: {path} is not a directory "
            f"(pass --data DIR pointing at the folder that holds {name}/)"
        )
    for filename in must_contain:
        if not (path / filename).exists():
            raise DataMissingError(f"benchmark data incomplete: {path / filename} is missing")
    return path


def user_request(text: str, model: str = "router/eval") -> ChatRequest:
    """The neutral request a benchmark prompt becomes: one user message, nothing else."""
    return ChatRequest(model=model, messages=[Message(role="user", content=[TextPart(text)])])


def candidate(name: str, quality: float, input_price: float, output_price: float) -> Candidate:
    """A model as the router sees it: a configured quality prior and list prices."""
    price = Price(input=input_price, output=output_price)
    return Candidate(name, ModelConfig(quality=quality, price=price))


def two_model_router(
    strategy: str, weak: str, strong: str, *, t2: float | None = None, alpha: float = 0.5
) -> RouterConfig:
    """A router over one weak and one strong model, as tiergate's demo config builds it.

    The mid pool is the weak pool (defaults.py does the same), so gated_adaptive
    sends exactly the requests scoring >= t2 to the strong model. t1 is set to t2
    when t2 is given, which makes the (unused) mid band empty.
    """
    thresholds = Thresholds() if t2 is None else Thresholds(t1=t2, t2=t2)
    return RouterConfig(
        name="eval",
        strategy=strategy,  # validated by pydantic
        weak_pool=[weak],
        mid_pool=[weak],
        strong_pool=[strong],
        thresholds=thresholds,
        linucb_alpha=alpha,
    )


def first_choice(strategy: str, candidates: Sequence[Candidate], ctx: StrategyContext) -> str:
    """The model tiergate's strategy ranks first for this request."""
    return strategies.rank(strategy, candidates, ctx)[0]


def progress(
    items: Iterable[T], desc: str, total: int | None = None, enabled: bool = True
) -> Iterator[T]:
    """A tqdm bar on stderr (off with --quiet, and in tests)."""
    yield from tqdm(items, desc=desc, total=total, disable=not enabled, leave=False)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; numbers are expected pre-formatted."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def code_version() -> dict[str, Any]:
    """The commit the results came from, and whether the routing code had local edits
    (results describe the routing code as it was, so they must say which)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src/tiergate/routing", "eval"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "local_changes": None}
    return {"commit": commit, "local_changes": bool(dirty)}


def provenance(code: dict[str, Any]) -> str:
    """One line saying which code produced a table."""
    if not code.get("commit"):
        return "- Code version: unknown (not a git checkout)."
    edits = " with local edits to routing/eval code" if code.get("local_changes") else ""
    return f"- Code version: tiergate {code['commit']}{edits}."


def write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def replace_section(text: str, section: str, begin: str, end: str) -> str:
    """`text` with its generated `begin`...`end` block replaced by `section` (which
    carries the markers), or `section` appended when the block is not there yet."""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        return head + section + rest.split(end, 1)[1]
    return text.rstrip() + "\n\n" + section + "\n"


def update_doc(doc: Path, section: str, begin: str, end: str) -> None:
    """Write `section` into `doc` in place of its generated block (`replace_section`)."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    doc.write_text(replace_section(text, section, begin, end), encoding="utf-8")


def commit_label() -> str:
    """The checkout's short commit, marked when tracked files have local edits."""
    git = ["git", "-C", str(REPO_ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return (head.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty else "")


def measured_stamp() -> str:
    """'YYYY-MM-DD HH:MM UTC, commit X': when and on which code a figure was made."""
    now = datetime.datetime.now(datetime.UTC)
    return f"{now:%Y-%m-%d %H:%M} UTC, commit {commit_label()}"


def publish(
    json_path: Path | None, payload: Any, section: str, doc: Path | None, begin: str, end: str
) -> None:
    """A generated result's outputs: its JSON (when `json_path`), its block in `doc`
    (when `doc`), and the block on stdout."""
    if json_path is not None:
        json_path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
    if doc is not None:
        update_doc(doc, section, begin, end)
    print(section)


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (headless CI, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    """PNG at a modest resolution: the committed copies must stay under 200 KB."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    pyplot().close(fig)


def add_common_arguments(parser: argparse.ArgumentParser, default_out: Path) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=default_data_dir(),
        metavar="DIR",
        help="folder holding the shared benchmark data (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=default_out,
        metavar="DIR",
        help="where tables, JSON, figures and prediction files go (default: %(default)s)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def run_cli(main: Callable[[], int]) -> None:
    """Exit with main()'s status; a missing data set is one clear line and status 2."""
    try:
        status = main()
    except DataMissingError as err:
        print(f"error: {err}", file=sys.stderr)
        status = 2
    sys.exit(status)
