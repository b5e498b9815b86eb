"""The documentation's commands and links hold: a renamed knob, group option or page breaks the build.

Every `python main.py ...` command in README.md, docs/*.md and benchmarks/README.md (in a code block, continued lines
joined, or inline in prose) is composed with Hydra's compose API from the overrides on its line, nothing run: a
multirun (`-m`) composes once per swept value, `hydra/launcher=...` and `hydra.*` overrides are composed with Hydra's
own config (a launcher or sweeper plugin that is not installed gets an empty stand-in, so the rest of the line is still
checked). Every relative link and image in the same files names an existing file, and an existing heading when it has
an anchor; the README links every docs page.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = [ROOT / "README.md", *DOC_PAGES, ROOT / "benchmarks" / "README.md"]
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
COMMAND = "python main.py"
# Hydra plugins the docs name, by the module that provides them (the test extra installs joblib and submitit)
PLUGINS = {("launcher", "joblib"): "hydra_plugins.hydra_joblib_launcher",
           ("launcher", "submitit_local"): "hydra_plugins.hydra_submitit_launcher",
           ("launcher", "submitit_slurm"): "hydra_plugins.hydra_submitit_launcher",
           ("launcher", "ray"): "hydra_plugins.hydra_ray_launcher",
           ("sweeper", "optuna"): "hydra_plugins.hydra_optuna_sweeper"}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def doc_commands() -> list[tuple[str, str]]:
    """(file:line, the text after `python main.py`) for every command of the documentation."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in FENCE.finditer(text):
            lines = block.group(0).splitlines()[1:-1]
            start = _line_of(text, block.start()) + 1
            joined: list[tuple[int, str]] = []
            for n, line in enumerate(lines, start):
                if joined and joined[-1][1].endswith("\\"):
                    joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
                else:
                    joined.append((n, line.rstrip()))
            for n, line in joined:
                for part in re.split(r"&&|\|\||\||;", line):
                    if COMMAND in part and not part.lstrip().startswith("#"):
                        out.append((f"{_rel(path)}:{n}", part.split(COMMAND, 1)[1]))
        prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # same line numbers, no code blocks
        for span in re.finditer(r"`([^`]*)`", prose):
            for part in re.split(r"&&|\|", span.group(1)):
                if COMMAND in part:
                    out.append((f"{_rel(path)}:{_line_of(prose, span.start())}",
                                part.split(COMMAND, 1)[1].replace("\n", " ")))
    return out


@cache
def _stub_searchpath(tmp: str) -> str:
    """An empty config for each plugin the docs name that is not installed (its keys cannot be checked)."""
    for (group, name), module in PLUGINS.items():
        try:
            installed = find_spec(module) is not None
        except ModuleNotFoundError:
            installed = False
        if not installed:
            folder = Path(tmp) / "hydra" / group
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.yaml").write_text("# @package hydra." + group + "\n{}\n", encoding="utf-8")
    return f"hydra.searchpath=[file://{tmp}]"


def overrides_of(command: str) -> tuple[list[str], bool]:
    """The overrides written on a command line (placeholders made concrete) and whether it is a multirun."""
    args = shlex.split(command, comments=True)
    multirun = bool({"-m", "--multirun"} & set(args))
    overrides = []
    for arg in args:
        if arg.startswith("-") or arg == "...":
            continue
        overrides.append(re.sub(r"<[^<>=]*>", "X", arg))  # placeholders such as <time>, <...>
    return overrides, multirun


def compositions(overrides: list[str], multirun: bool) -> list[list[str]]:
    """One override list per composition: the first value of every sweep, then each other value in turn."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    sweeps = [i for i, o in enumerate(parsed) if o.is_sweep_override()]
    if not multirun or not sweeps:
        return [overrides]  # (a sweep without -m fails in compose, as it would in `python main.py`)
    values = {i: list(parsed[i].sweep_string_iterator()) for i in sweeps}

    def with_values(chosen: dict[int, str]) -> list[str]:
        return [f"{parsed[i].get_key_element()}={chosen[i]}" if i in chosen else o for i, o in enumerate(overrides)]

    first = {i: values[i][0] for i in sweeps}
    out = [with_values(first)]
    for i in sweeps:
        out += [with_values({**first, i: v}) for v in values[i][1:]]
    return out


def compose_as_written(overrides: list[str], stubs: str) -> None:
    from hydra import compose, initialize_config_dir


    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        compose(config_name="config", overrides=[*overrides, stubs], return_hydra_config=True)


CONF_FILES = sorted(CONF.rglob("*.yaml"))
DATA_READMES = sorted((ROOT / "data").rglob("README.md"))
# a path of this repository named in a comment or a data README: it must exist
REPO_PATH = re.compile(r"\b((?:tests|benchmarks|docs|common|lms|programs|runners|optimizers|retrieval|tasks|signatures|"
                       r"serving|reports|conf|data)/[\w./-]*\w\.(?:py|md|yaml|json|jsonl|xml|txt|csv))\b")
DATA_FILE = re.compile(r"`([\w.-]+\.(?:json|jsonl|xml|csv|txt|gguf))`")


def conf_comment_commands() -> list[tuple[str, str]]:
    """(file:line, the text after `python main.py`) for every command in a comment of conf/."""
    out = []
    for path in CONF_FILES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            comment = line.split("#", 1)[1] if "#" in line else ""
            if COMMAND in comment:  # the command ends at a closing backtick or a note after two spaces
                command = re.split(r"`| {2,}", comment.split(COMMAND, 1)[1])[0]
                out.append((f"{_rel(path)}:{n}", command))
    return out


COMMANDS = doc_commands() + conf_comment_commands()


def named_paths() -> list[tuple[str, str]]:
    """(file:line, path) for every repository path in a conf/ comment, a data README or a documentation page (not a
    path in another repository, cited after `github.com/...`, nor one a file was "formerly" at), and every file the
    first column of a data README's `| file |` table names (looked up under that README's folder)."""
    out = []
    for path in [*CONF_FILES, *DATA_READMES, *DOCS]:
        in_file_table = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if path.suffix == ".yaml":
                if "#" not in line:
                    continue
                line = line.split("#", 1)[1]
            for match in REPO_PATH.finditer(line):
                before = line[: match.start()]
                if "github.com/" not in before and not before.rstrip("` (").endswith("formerly"):
                    out.append((f"{_rel(path)}:{n}", match.group(1)))
            if path in DATA_READMES and line.startswith("|"):
                first = line.split("|")[1].strip()
                in_file_table = first == "file" or in_file_table  # the header row, then its separator and rows
                if in_file_table and first != "file" and not set(first) <= set("-: "):
                    out += [(f"{_rel(path)}:{n}", f"{_rel(path.parent)}/**/{m}") for m in DATA_FILE.findall(first)]
            elif not line.startswith("|"):
                in_file_table = False
    return out


PATHS = named_paths()


@pytest.mark.parametrize("where,name", PATHS, ids=[f"{w}:{p}" for w, p in PATHS])
def test_every_path_a_comment_or_readme_names_exists(where, name):
    if "/**/" in name:
        folder, file = name.split("/**/")
        assert any((ROOT / folder).rglob(file)), f"{where}: names {file}, which is not under {folder}/"
    else:
        assert (ROOT / name).exists(), f"{where}: names {name}, which does not exist"


@pytest.mark.parametrize("where,command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_composes(where, command, tmp_path_factory):
    overrides, multirun = overrides_of(command)
    stubs = _stub_searchpath(str(tmp_path_factory.getbasetemp() / "hydra_plugin_stubs"))
    for composition in compositions(overrides, multirun):
        failure = composition_failure(tuple(composition), stubs)
        if failure:
            pytest.fail(f"{where}: python main.py {' '.join(composition)}: {failure}")


@cache
def composition_failure(composition: tuple[str, ...], stubs: str) -> str | None:
    """Why these overrides do not compose, or None; each distinct list is composed once per process (a third of
    the documentation's compositions repeat another page's: ~0.3 s each)."""
    try:
        compose_as_written(list(composition), stubs)
    except Exception as exc:  # noqa: BLE001 - the message is the point
        return f"{type(exc).__name__}: {exc}"
    return None


def test_commands_are_found_in_every_kind_of_place():
    found = {w.split(":")[0] for w, _ in COMMANDS}
    assert {"README.md", "benchmarks/README.md", "docs/configuration.md", "docs/scaling.md"} <= found
    texts = [c for _, c in COMMANDS]
    assert any("-m" in c.split() for c in texts)  # multiruns
    assert any("hydra/launcher=" in c for c in texts)
    assert any("data.val_key=null" in c for c in texts)  # a line continued with a backslash, joined
    assert any("'corpus.metadata_fields=[]'" in c for c in texts)  # an inline command over two lines of prose
    assert len(COMMANDS) > 80


def test_a_renamed_knob_or_option_fails_and_sweeps_expand(tmp_path_factory):
    stubs = _stub_searchpath(str(tmp_path_factory.getbasetemp() / "hydra_plugin_stubs"))
    with pytest.raises(Exception, match="evidence"):
        compose_as_written(["program=archehr", "program.evidence.no_such_knob=1"], stubs)
    with pytest.raises(Exception, match="gemnii"):
        compose_as_written(["lm=gemnii"], stubs)
    overrides, multirun = overrides_of("-m a=1,2 b=x dirs=[p,q] c=3,4  # comment")
    assert multirun and overrides == ["a=1,2", "b=x", "dirs=[p,q]", "c=3,4"]
    assert compositions(overrides, multirun) == [["a=1", "b=x", "dirs=[p,q]", "c=3"],
                                                 ["a=2", "b=x", "dirs=[p,q]", "c=3"],
                                                 ["a=1", "b=x", "dirs=[p,q]", "c=4"]]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (but - and _), spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    prose = FENCE.sub("", path.read_text(encoding="utf-8"))
    for m in re.finditer(r"^#{1,6} (.+)$", prose, re.M):
        slug = _slug(m.group(1))
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def doc_links() -> list[tuple[str, Path, str]]:
    """(file:line, the linking page, target) of every relative link and image outside code."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        prose = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
        for m in re.finditer(r"\]\(([^)\s]+)\)", prose):
            target = m.group(1)
            if not re.match(r"[a-z]+:", target):
                out.append((f"{_rel(path)}:{_line_of(prose, m.start())}", path, target))
    return out


LINKS = doc_links()


@pytest.mark.parametrize("where,page,target", LINKS, ids=[f"{w}->{t}" for w, _, t in LINKS])
def test_every_relative_link_resolves(where, page, target):
    file, _, anchor = target.partition("#")
    resolved = (page.parent / file).resolve() if file else page
    assert resolved.exists(), f"{where}: {target}: no such file"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), f"{where}: {target}: no heading #{anchor} in {_rel(resolved)}"


def test_the_readme_links_every_docs_page_and_the_report_image_is_shown():
    linked = {(ROOT / t.partition("#")[0]).resolve() for w, p, t in LINKS if p.name == "README.md" and p.parent == ROOT}
    assert set(DOC_PAGES) - linked == set(), "docs pages the README does not link"
    images = {(p.parent / t).resolve() for _, p, t in LINKS if t.endswith(".png")}
    assert ROOT / "docs" / "report_archehr_case.png" in images


def test_ci_runs_exactly_the_readme_test_command():
    """`.ci/run` and a new user run the same tests: the README's one `pytest` command line is a line of `.ci/run`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.strip() for block in FENCE.finditer(readme) for line in block.group(0).splitlines()
                if "python -m pytest" in line]
    assert len(commands) == 1, f"README.md has {len(commands)} test command lines, not one"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert commands[0] in ci
