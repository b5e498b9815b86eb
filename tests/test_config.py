"""Every config group composes, and each LM backend fails early with one clear message."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from lms import LMConfigError, build_lm, build_role_lms

pytestmark = pytest.mark.unit

CONF = str(Path(__file__).resolve().parents[1] / "conf")
LM_GROUP = sorted(p.stem for p in (Path(CONF) / "lm").glob("*.yaml"))
METRICS_GROUP = sorted(p.stem for p in (Path(CONF) / "metrics").glob("*.yaml"))
RETRIEVAL_GROUPS = [(group, p.stem) for group in ("retriever", "embedder", "reranker", "corpus")
                    for p in sorted((Path(CONF) / group).glob("*.yaml"))]


def compose_cfg(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("lm", LM_GROUP)
@pytest.mark.parametrize("metrics", METRICS_GROUP)
def test_every_group_composes_and_resolves(lm, metrics):
    cfg = compose_cfg(f"lm={lm}", f"metrics={metrics}", "program=archehr")
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert cfg.lm.client is None if lm == "none" else cfg.lm.client._target_.startswith("lms.factory.")
    assert cfg.program.answer.max_words == 75
    if lm == "none":  # no LM: the non-LLM implementations, with only their own parameters
        assert "strict_threshold" not in cfg.program.evidence and "min_selected" in cfg.program.evidence
    else:
        assert cfg.program.evidence.strict_threshold == 4 and "top_share" not in cfg.program.evidence


@pytest.mark.parametrize(("group", "option"), RETRIEVAL_GROUPS)
def test_retrieval_groups_compose_and_instantiate_lazily(group, option, tmp_path):
    from hydra.utils import instantiate

    cfg = compose_cfg(f"{group}={option}")
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    if group == "embedder":
        emb = instantiate(cfg.embedder)  # models load on first use, so hub names compose offline
        assert emb.model_name == cfg.embedder.model
    if group == "corpus":
        from retrieval.corpus import CorpusSpec, resolve_paths

        assert resolve_paths(CorpusSpec(**OmegaConf.to_container(cfg.corpus, resolve=True)))
    if group == "reranker":  # a cross-encoder named by hub id builds offline: its model loads on first use
        reranker = instantiate(cfg.reranker) if cfg.reranker.get("_target_") else None
        assert reranker is None if option == "none" else reranker.model_name == cfg.reranker.model
    if group == "retriever" and option == "local":  # opening an index folder that does not exist reads nothing
        from retrieval.factory import build_retriever

        retriever = build_retriever(compose_cfg(f"{group}={option}", f"index_dir={tmp_path / 'no-index'}"))
        assert retriever.k == cfg.retriever.k and retriever.rerank_k == cfg.retriever.rerank_k
        assert not (tmp_path / "no-index").exists()


def test_defaults_are_the_no_lm_program():
    cfg = compose_cfg()
    assert cfg.program.name == "archehr" and cfg.lm.client is None and cfg.task._target_ == "runners.program.run"
    assert compose_cfg("lm=embedded").lm.client.model == "smollm2-135m-instruct"


def test_gemini_without_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(LMConfigError, match="GEMINI_API_KEY"):
        build_lm(compose_cfg("lm=gemini").lm)


def test_openai_without_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LMConfigError, match="OPENAI_API_KEY"):
        build_lm(compose_cfg("lm=openai").lm)


def test_unreachable_openai_compatible_server_is_one_clear_error():
    cfg = compose_cfg("lm=openai_compatible", "lm.client.api_base=http://127.0.0.1:9/v1")
    with pytest.raises(LMConfigError, match=r"no server answers at http://127\.0\.0\.1:9/v1"):
        build_lm(cfg.lm)


def test_missing_gguf_is_a_config_error():
    with pytest.raises(LMConfigError, match="GGUF file not found"):
        build_lm(compose_cfg("lm=embedded", "lm.client.model_path=/nonexistent/model.gguf").lm)


def test_gemini_key_is_not_kept_in_the_config_or_lm(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "secret-test-key")
    lm = build_lm(compose_cfg("lm=gemini").lm)
    assert "secret-test-key" not in repr(lm.kwargs) and lm.model == "gemini/gemini-2.5-pro"


def test_role_override_builds_a_separate_lm():
    cfg = compose_cfg("lm=openai_compatible", "lm.client.check=false",
                      "+lm.roles.alignment={model: aligner-model}")
    lms = build_role_lms(cfg.lm, ["question", "alignment"])
    assert lms["question"].model == "openai/local-model"
    assert lms["alignment"].model == "openai/aligner-model"
