"""Old module paths keep working for one release (#52 item 3: programs/archehr/ as one package per stage): every
entry of common.aliases.MOVED_MODULES imports as its new module (the same object, or a stand-in whose names are the
new modules' objects) with one `deprecated:` line, every `_target_` conf/ used before the move resolves to the same
object as its new one, and no file under conf/ names an old path any more."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
from hydra.utils import get_class, get_method

import programs.archehr  # noqa: F401  (installs the finder)
from common.aliases import MOVED_MODULES, MovedModule, MovedModuleFinder, moved_module

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]

# Every `_target_` under conf/ before the move (git show 8d2c0c6:conf/..., `_target_: programs.archehr...`) that
# names a moved module, and where conf/ points now.
OLD_TARGETS = {
    "programs.archehr.align.AnswerAligner": "programs.archehr.alignment.lm.AnswerAligner",
    "programs.archehr.answer.AnswerGenerator": "programs.archehr.answer.lm.AnswerGenerator",
    "programs.archehr.demos.load_question_demos": "programs.archehr.question.demos.load_question_demos",
    "programs.archehr.evidence.EvidenceScorer": "programs.archehr.evidence.lm.EvidenceScorer",
    "programs.archehr.grounding.GroundingCheck": "programs.archehr.grounding.similarity.GroundingCheck",
    "programs.archehr.grounding_claims.ClaimsGroundingCheck": "programs.archehr.grounding.claims.ClaimsGroundingCheck",
    "programs.archehr.grounding_learned.LearnedGroundingCheck":
        "programs.archehr.grounding.learned.LearnedGroundingCheck",
    "programs.archehr.interpret.QuestionInterpreter": "programs.archehr.question.lm.QuestionInterpreter",
    "programs.archehr.no_lm.EmbeddingEvidenceScorer": "programs.archehr.evidence.embedding.EmbeddingEvidenceScorer",
    "programs.archehr.no_lm.EmbeddingLikertEvidenceScorer":
        "programs.archehr.evidence.embedding.EmbeddingLikertEvidenceScorer",
    "programs.archehr.no_lm.ExtractiveAnswer": "programs.archehr.answer.extractive.ExtractiveAnswer",
    "programs.archehr.no_lm.SimilarityAligner": "programs.archehr.alignment.similarity.SimilarityAligner",
    "programs.archehr.no_lm.learned.LearnedAligner": "programs.archehr.alignment.learned.LearnedAligner",
    "programs.archehr.no_lm.learned.LearnedEvidenceScorer": "programs.archehr.evidence.learned.LearnedEvidenceScorer",
    "programs.archehr.question_baseline.BaselineQuestion": "programs.archehr.question.baseline.BaselineQuestion",
    "programs.archehr.question_model.FinetunedQuestionInterpreter":
        "programs.archehr.question.finetuned.FinetunedQuestionInterpreter",
}
# a moved package's submodules follow it without an entry of their own
SUBMODULES = [f"programs.archehr.verifier.{name}" for name in ("features", "module", "pairs", "perturb", "weights")]


def _forget(name: str) -> None:
    """`name` and its old submodules out of sys.modules (the new modules stay), so the next import runs the finder."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        if moved_module(key) is not None:
            del sys.modules[key]


def _fresh_process_state(name: str) -> None:
    """As in a new process: `name`, its old parents and their old submodules out of sys.modules, no line printed yet."""
    package = name
    while moved_module(package) is not None:
        _forget(package)
        package = package.rpartition(".")[0]
    for finder in sys.meta_path:
        if isinstance(finder, MovedModuleFinder):
            finder.announced.clear()


def _import_with_lines(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[object, list[str]]:
    """`import <name>` as a new process runs it (an old parent is imported on the way, silently: the statement
    names the submodule, whose line stands for both)."""
    _fresh_process_state(name)
    capsys.readouterr()
    module = importlib.import_module(name)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("deprecated:")]
    return module, lines


def _public(module: object) -> dict[str, object]:
    """The names a module defines itself (not those it imports)."""
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and getattr(v, "__module__", None) == module.__name__}


@pytest.mark.parametrize("entry", MOVED_MODULES, ids=[m.old for m in MOVED_MODULES])
def test_every_moved_module_imports_as_its_new_one_with_one_deprecation_line(
        entry: MovedModule, capsys: pytest.CaptureFixture[str]) -> None:
    module, lines = _import_with_lines(entry.old, capsys)
    assert lines == [entry.line()]
    assert entry.line() == (f"deprecated: {entry.old} is now {', '.join(entry.new)}; "
                            "the old name goes in the next release")
    news = [importlib.import_module(n) for n in entry.new]
    if len(news) == 1:
        assert module is news[0]
        assert module.__name__ == module.__spec__.name == entry.new[0]   # the new module's own spec, kept
    else:
        names = 0
        for new in news:
            for name, value in _public(new).items():
                if not any(name in vars(earlier) for earlier in news[:news.index(new)]):
                    assert getattr(module, name) is value, name
                    names += 1
        assert names
        with pytest.raises(AttributeError, match="is now"):
            module.no_such_name  # noqa: B018
    importlib.import_module(entry.old)     # already imported: no second line
    assert "deprecated:" not in capsys.readouterr().err


@pytest.mark.parametrize("name", SUBMODULES)
def test_a_moved_packages_submodules_follow_it(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module, lines = _import_with_lines(name, capsys)
    new = name.replace("programs.archehr.verifier.", "programs.archehr.grounding.verifier.")
    assert module is importlib.import_module(new)
    assert lines == [f"deprecated: {name} is now {new}; the old name goes in the next release"]


def test_a_submodule_imported_from_its_old_package_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`from old.pkg import mod` imports old.pkg (its line), then old.pkg.mod, whose new place that line already
    gave: one line in all; a submodule with an entry of its own still gets its own line."""
    _fresh_process_state("programs.archehr.verifier.pairs")
    capsys.readouterr()
    from programs.archehr.verifier import pairs, weights  # noqa: F401
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("deprecated:")]
    assert lines == [MovedModule("programs.archehr.verifier", ("programs.archehr.grounding.verifier",)).line()]
    assert pairs is importlib.import_module("programs.archehr.grounding.verifier.pairs")
    _fresh_process_state("programs.archehr.no_lm.evidence")
    capsys.readouterr()
    from programs.archehr.no_lm import evidence  # noqa: F401
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("deprecated:")]
    assert [line.split(" is now")[0] for line in lines] == ["deprecated: programs.archehr.no_lm",
                                                             "deprecated: programs.archehr.no_lm.evidence"]


def test_the_old_package_names_of_the_split_modules_keep_their_classes() -> None:
    from programs.archehr.no_lm import SimilarityAligner
    from programs.archehr.no_lm.evidence import is_header, to_likert
    from programs.archehr.no_lm.features import EVIDENCE_FEATURES, content_quantities, split_anchor

    from programs.archehr.alignment.similarity import SimilarityAligner as new_aligner
    from programs.archehr.evidence.embedding import to_likert as new_to_likert
    from programs.archehr.evidence.features import EVIDENCE_FEATURES as new_features
    from programs.archehr.evidence.features import split_anchor as new_split_anchor
    from programs.archehr.shared.claims import content_quantities as new_content_quantities
    from programs.archehr.shared.note_layout import is_header as new_is_header

    assert SimilarityAligner is new_aligner and to_likert is new_to_likert and is_header is new_is_header
    assert EVIDENCE_FEATURES is new_features and split_anchor is new_split_anchor
    assert content_quantities is new_content_quantities


def test_a_name_that_did_not_move_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("programs.archehr.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("programs.archehr.no_lm.no_such_module")
    assert moved_module("programs.archehr.evidence") is None   # the package re-exports the old module's names


def _resolve(target: str) -> object:
    return get_class(target) if target.rpartition(".")[2][:1].isupper() else get_method(target)


@pytest.mark.parametrize("old", sorted(OLD_TARGETS))
def test_every_old_target_resolves_to_the_same_object_as_its_new_one(old: str) -> None:
    new = OLD_TARGETS[old]
    assert _resolve(old) is _resolve(new)
    assert any(f"_target_: {new}\n" in p.read_text() for p in (ROOT / "conf").rglob("*.yaml")), new


def test_no_file_under_conf_names_an_old_module_path() -> None:
    olds = [m.old.removeprefix("programs.archehr.") for m in MOVED_MODULES]
    dotted = re.compile(r"programs\.archehr\.(" + "|".join(map(re.escape, olds)) + r")\b|"
                        r"programs\.archehr\.(evidence|answer|grounding)\.[A-Z]\w*")   # the packages' re-exports
    slashed = re.compile(r"programs/archehr/(" + "|".join(o.replace(".", "/") for o in olds) + r")(\.py|/)|"
                         r"programs/archehr/(evidence|answer|grounding)\.py")
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sorted((ROOT / "conf").rglob("*.yaml"))
             for pattern in (dotted, slashed) for m in pattern.finditer(p.read_text())]
    assert not found
