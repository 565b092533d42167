"""Run one documentation page as a reader would: ``python docs_runner.py PAGE WORKDIR``.

The fenced blocks of the page, in order, in WORKDIR (a fresh directory):

- a block with ``title="PATH"`` (any language) is a file: written to ``WORKDIR/PATH``;
- a ``python`` block is run, all of a page's blocks in one namespace, as a notebook;
- a ``console`` block holds commands (``$ COMMAND``) run with bash, each followed by lines
  its output must contain in that order (``...`` in a line matches anything); a command
  must exit 0 unless a line ``(exit status N)`` says otherwise;
- a ``bash`` block may only install (``pip``, ``git``, ``./dev.sh``). Its ``pip install``
  lines run, into a directory of the page's own put first on the path of what follows: a
  local folder is installed as is, a distribution of this repository (``pt2onnx-ort``)
  from its folder; one the running environment has already (``pt2onnx``) is not installed
  again, nor is any other requirement;
- a page that imports torchvision gets it as the tests do (``_torchvision``);
- a block preceded by ``<!-- not run: REASON -->`` is not run; other languages
  (``toml``, ``text``) are not run.

Exits 0 when every block ran as the page says; otherwise prints which block failed and why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import cli_process
from pack_install import pip_install

FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S
)
TITLE = re.compile(r'title="(?P<path>[^"]+)"')
NOT_RUN = re.compile(r"<!-- not run: (?P<reason>[^>]+?) -->\s*\Z")
EXIT = re.compile(r"^\(exit status (?P<code>\d+)\)$")
#: What a ``bash`` block may hold: installation commands.
INSTALL_COMMANDS = ("pip ", "python -m pip ", "git clone ", "cd ", "./dev.sh ")
ROOT = Path(__file__).resolve().parent.parent
#: The commands of this repository's distributions.
CONSOLE_SCRIPTS = ("pt2onnx", "pt2onnx-transformers")
#: The distributions of this repository, by name, and their folders.
REPOSITORY_DISTRIBUTIONS = {
    "pt2onnx": ROOT / "core",
    **{f"pt2onnx-{p.name}": p for group in ("plugins", "contrib") for p in sorted((ROOT / group).iterdir())},
}


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    line: int
    not_run: str | None


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, dedented, in order."""
    found = []
    for match in FENCE.finditer(text):
        indent = len(match["indent"])
        body = "\n".join(line[indent:] for line in match["body"].splitlines()) + "\n"
        title = TITLE.search(match["info"])
        skip = NOT_RUN.search(text[: match.start()])
        found.append(
            Block(
                match["lang"],
                title["path"] if title else None,
                body,
                text.count("\n", 0, match.start()) + 1,
                skip["reason"] if skip else None,
            )
        )
    return found


def _matches(expected: str, line: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.search(pattern, line) is not None


def check_output(expected: list[str], output: str) -> str | None:
    """None when ``output`` has every expected line in order; else what is missing."""
    lines = output.splitlines()
    position = 0
    for want in expected:
        if want.strip() in ("", "..."):
            continue
        while position < len(lines) and not _matches(want.strip(), lines[position]):
            position += 1
        if position == len(lines):
            return f"missing (in order) from the output: {want.strip()!r}"
        position += 1
    return None


def run_console(block: Block, workdir: Path, env: dict[str, str]) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in block.body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    if not commands:
        raise AssertionError("a console block without a '$ ' command")
    for command, expected in commands:
        status = 0
        for line in expected:
            code = EXIT.match(line.strip())
            if code:
                status = int(code["code"])
        words = _console_script(command)
        if words:
            done = cli_process.run(*words, cwd=workdir, env=env, timeout=600)
        else:
            done = subprocess.run(
                ["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=600
            )
        output = done.stdout + done.stderr
        if done.returncode != status:
            raise AssertionError(f"$ {command}\nexited {done.returncode}, the page says {status}:\n{output[-4000:]}")
        missing = check_output([line for line in expected if not EXIT.match(line.strip())], output)
        if missing:
            raise AssertionError(f"$ {command}\n{missing}\nits output:\n{output[-4000:]}")


def _console_script(command: str) -> list[str] | None:
    """The words of ``command`` when it is a plain call of one of pt2onnx's commands (no pipe,
    redirection, variable or glob for bash to read): it then runs forked warm (tests/cli_process.py)."""
    if re.search(r"[|&;<>()$`*?~\\'\"]", command):
        return None
    words = command.split()
    return words if words and words[0] in CONSOLE_SCRIPTS else None


def _installed(name: str) -> bool:
    from importlib import metadata

    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def run_pip_install(line: str, workdir: Path, site: Path) -> None:
    """``pip install ...`` of a bash block, into ``site`` (see the module docstring)."""
    words = line.split()
    targets = []
    for word in words[words.index("install") + 1 :]:
        if word.startswith("-"):
            continue
        name = re.split(r"[\[<>=!~ ]", word.strip("\"'"), maxsplit=1)[0]
        if word.startswith((".", "/")):
            # A folder the page made, else one of the repository (a checkout's `./core`).
            folder = (workdir / word).resolve() if (workdir / word).exists() else (ROOT / word).resolve()
            by_folder = {path: dist for dist, path in REPOSITORY_DISTRIBUTIONS.items()}
            name = by_folder.get(folder, "")
            if not name or not _installed(name):
                targets.append(str(folder))
        elif name in REPOSITORY_DISTRIBUTIONS and not _installed(name):
            targets.append(str(REPOSITORY_DISTRIBUTIONS[name]))
    if targets:
        pip_install(*targets, target=site, timeout=600)


def _torchvision() -> None:
    """torchvision for a page that imports it, as the tests have it (tests/torchvision_ops.py)."""
    from torchvision_ops import install

    install()


def run_page(page: Path, workdir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    site = workdir.parent / f"{workdir.name}-site-packages"
    namespace = types.ModuleType("__main__")
    sys.modules["__main__"] = namespace
    sys.path.insert(0, str(workdir))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    text = page.read_text(encoding="utf-8")
    if re.search(r"^(from|import) torchvision", text, re.M):
        _torchvision()
    for block in blocks(text):
        where = f"{page.name}:{block.line}"
        if block.title is not None:
            target = workdir / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.body, encoding="utf-8")
            continue
        if block.not_run is not None:
            continue
        if block.lang == "bash":
            for line in block.body.splitlines():
                command = line.split("#", 1)[0].strip()
                if command and not command.startswith(INSTALL_COMMANDS):
                    raise AssertionError(f"{where}: a bash block may only install; run {line!r} in a console block")
                if command.startswith(("pip install", "python -m pip install")):
                    run_pip_install(command, workdir, site)
                    if str(site) not in sys.path:
                        sys.path.insert(0, str(site))
                        env["PYTHONPATH"] = str(site)
            continue
        try:
            if block.lang == "python":
                exec(compile(block.body, where, "exec"), namespace.__dict__)
            elif block.lang == "console":
                run_console(block, workdir, env)
        except BaseException:
            print(f"block at {where} ({block.lang}) failed:\n{textwrap.indent(block.body, '    ')}", file=sys.stderr)
            raise


def main() -> int:
    page, workdir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    try:
        run_page(page, workdir)
    except Exception:  # noqa: BLE001 (report any failure of the page, then fail)
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
