"""The package's shape: imports follow the flow, heavy dependencies stay out until used, the
command line answers --help without torch, and every kind of thing registers one way."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import compscope

SRC = Path(compscope.__file__).parent
#: the stage each top-level part of the package belongs to
STAGE = {
    "errors": "base", "registry": "base", "progress": "base", "defaults": "base",
    "core": "core", "measures": "measures", "results": "results", "engine": "engine",
    "loading": "loading", "toy": "toy", "analysis": "analysis", "data": "data",
    "api": "api", "report": "report", "cli": "cli", "sweep": "sweep", "__init__": "root",
}
#: what each stage may not import (statically, anywhere in its modules)
FORBIDDEN = {
    "base": {"core", "measures", "results", "engine", "loading", "toy", "analysis", "data", "api", "report", "cli", "sweep"},
    "core": {"measures", "results", "engine", "loading", "toy", "analysis", "data", "api", "report", "cli", "sweep"},
    "measures": {"results", "engine", "loading", "toy", "analysis", "data", "api", "report", "cli", "sweep"},
    "results": {"engine", "loading", "toy", "analysis", "data", "api", "report", "cli", "sweep"},
    "engine": {"loading", "toy", "analysis", "data", "api", "report", "cli", "sweep"},
    "loading": {"engine", "analysis", "data", "api", "report", "cli", "sweep"},
    "toy": {"engine", "analysis", "api", "report", "cli", "sweep"},
    "analysis": {"api", "report", "cli", "sweep"},
    "data": {"api", "report", "cli", "sweep"},
    "api": {"report", "cli", "sweep"},
    "report": {"cli", "sweep"},
    "sweep": {"cli"},
    "cli": set(),
    "root": set(),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level part of compscope)`` of every compscope import in ``path``."""
    rel = path.relative_to(SRC).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
                names = [target + [a.name] for a in node.names] if not target else [target]
            elif node.module and node.module.split(".")[0] == "compscope":
                names = [node.module.split(".")[1:] or [a.name for a in node.names][:1]]
            else:
                continue
            out += [(node.lineno, n[0]) for n in names if n]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("compscope.")]
    return out


def _stage(path: Path) -> str:
    part = path.relative_to(SRC).parts[0]
    return STAGE[part.removesuffix(".py")]


def test_every_part_of_the_package_has_a_stage():
    parts = {p.name.removesuffix(".py") for p in SRC.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert parts <= set(STAGE), f"new top-level parts without a stage: {sorted(parts - set(STAGE))}"


def test_imports_follow_the_flow():
    """source -> HeadWeights -> scores -> analyses -> report: nothing imports the command line or
    the report, the engine never imports loading, core imports nothing above it."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        stage = _stage(path)
        for line, target in _imports(path):
            if target in FORBIDDEN[stage] or (target in ("cli", "report") and stage not in ("cli", "report", "root")):
                bad.append(f"{path.relative_to(SRC)}:{line} ({stage}) imports compscope.{target}")
    assert not bad, "imports against the flow:\n" + "\n".join(bad)


def test_the_flow_check_catches_a_bad_import(tmp_path):
    """The checker itself: an engine module importing the loader is found."""
    fake = SRC / "engine" / "_probe_flow.py"
    fake.write_text("from ..loading.sources import load\n")
    try:
        assert (1, "loading") in _imports(fake)
        assert "loading" in FORBIDDEN[_stage(fake)]
    finally:
        fake.unlink()


HEAVY = ("torch", "numpy", "numba", "tqdm", "pandas", "pyarrow", "transformers", "gguf", "transformer_lens",
         "matplotlib", "plotly", "ray", "safetensors")


def _imported_after(code: str) -> list[str]:
    probe = f"import sys; {code}; print(','.join(m for m in {HEAVY!r} if sys.modules.get(m) is not None))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    return [m for m in out.split(",") if m]


def test_importing_compscope_is_light():
    assert _imported_after("import compscope, compscope.cli.main") == []


def test_loading_and_scoring_import_only_what_they_use():
    """The engine needs torch, numpy and safetensors (to read the model); numba comes with the
    first spectrum, never with a load; nothing optional comes along."""
    got = _imported_after("import compscope; hw = compscope.load('induction-2l'); compscope.scores(hw, 'K', progress=False)")
    floor = _imported_after("import torch, numpy, safetensors.torch")  # what they bring themselves (torch: tqdm)
    assert set(got) - set(floor) == set(), got


@pytest.mark.parametrize("command", ["", "info", "scores", "report", "pair", "circuits", "axioms", "gauge", "intervene",
                                     "validate", "train", "track", "sweep"])
def test_help_answers_without_torch(command):
    code = (f"import sys; sys.argv = ['compscope'] + {command.split()!r} + ['--help']\n"
            "from compscope.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "usage: compscope" in proc.stdout


def test_version():
    proc = subprocess.run([sys.executable, "-m", "compscope.cli.main", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"compscope {compscope.__version__}"


def test_train_presets_named_for_help_are_the_presets():
    from compscope.cli.train import PRESET_NAMES
    from compscope.toy.train import PRESETS

    assert tuple(PRESETS) == PRESET_NAMES


def test_the_root_exposes_its_api_and_subpackages():
    """What the README uses as attributes of ``compscope`` after ``import compscope`` exists."""
    import compscope as cs

    for name in cs.__all__:
        assert getattr(cs, name) is not None
    for sub in ("data", "toy", "report", "loading", "engine", "analysis", "results", "measures", "core"):
        assert getattr(cs, sub).__name__ == f"compscope.{sub}"
    assert callable(cs.data.residual_moments.residual_second_moments)
    assert callable(cs.loading.formats.native.save)
    with pytest.raises(AttributeError):
        cs.no_such_thing  # noqa: B018
    # what dir() offers (a notebook's completion) is the API, not what the root module imports to serve it
    assert set(dir(cs)) == {*cs.__all__, "analysis", "api", "core", "data", "engine", "loading", "measures", "report",
                            "results", "sweep", "toy"}


# ---------------------------------------------------------------- registries
def test_every_registry_is_one_mechanism_and_lists_its_names_in_errors():
    from compscope.cli.main import COMMANDS
    from compscope.core.metrics import METRICS
    from compscope.errors import CompscopeError
    from compscope.loading.builtin import BUILTINS
    from compscope.loading.families import FAMILIES
    from compscope.loading.formats import FORMATS
    from compscope.measures import MEASURES
    from compscope.registry import Registry

    for reg in (COMMANDS, METRICS, BUILTINS, FAMILIES, FORMATS, MEASURES):
        assert isinstance(reg, Registry)
        with pytest.raises(CompscopeError) as e:
            reg.get("no-such-name")
        msg = str(e.value)
        assert "no-such-name" in msg and all(n in msg for n in reg.names()), msg
        assert reg.select("all") == reg.names()
    assert MEASURES.names() == ["frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims", "bandwidth", "spectral", "read_gain"]
    assert METRICS.names() == ["identity", "embed", "unembed", "activations", "covariance", "activations-own", "covariance-own"]
    assert set(FAMILIES.names()) == {"afmoe", "aimv2_text", "apertus", "apertus1p5", "bamba", "bailing_hybrid", "bart_encoder", "blenderbot_encoder", "blenderbot_small_encoder", "bert", "bert_generation", "bert_text_tower", "big_bird", "bigbird_pegasus_encoder", "biogpt", "altclip_text", "bloom", "bridgetower_text", "bros", "chameleon", "clap_text", "clip_text", "codegen", "cohere", "cohere2_moe", "cohere_compass", "cosmos3_edge", "ctrl", "cwm", "data2vec_text", "deberta", "deberta_v2", "decilm", "deepseek_v2", "deepseek_v3", "deepseek_v32", "dia_encoder", "distilbert", "dpr", "electra", "embedding_gemma2", "emu3", "ernie", "ernie4_5", "esm", "esmc", "eurobert", "evolla", "exaone", "exaone4", "exaone_moe", "falcon", "falcon_h1", "flex_olmo", "flint", "fsmt_encoder", "glm", "glm4", "glm4_moe", "glm4v_moe_text", "glm4v_text", "glm_image_text", "glm_moe_dsa", "helium", "higgs_audio_v2", "hy_v3", "hyperclovax", "ibert", "jais", "jais2", "jina_bert_v2", "llama", "llama4", "llama_alibi", "luke", "megatron_bert", "mellum", "minicpm3", "minicpm5_moe", "minimax_m2", "mistral4", "mllama_text", "modernbert", "molmo2", "modernbert_decoder", "mpnet", "gemma", "gemma2", "gemma3", "gemma4", "git", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox_japanese", "gpt_oss", "neox", "gptj", "granite", "grok", "gte", "granite_hybrid", "granite_swa", "jamba", "jina_embeddings_v3", "kimi_linear", "kolibri1", "kosmos_2_5_text", "lara_mini", "layoutlm", "layoutlmv3", "led_encoder", "longformer", "lfm2", "lfm3", "longcat_flash", "longt5_encoder", "m2m100_encoder", "marian_encoder", "markuplm", "mimo_v2_flash", "mpt", "nllb_moe_encoder", "pegasus_encoder", "muse_glimmer", "nanochat", "nemotron", "nemotron_h", "nemotron_nas", "nomic_bert", "olmo", "olmo2", "olmo_hybrid", "olmoe", "openai_gpt", "opt", "paddleocr_vl", "param2moe", "persimmon", "phi", "phi3", "phi4_multimodal", "phimoe", "plamo2", "plamo3", "pocket_tts", "privacy_filter", "prophetnet_encoder", "qwen3", "qwen3_5", "qwen3_bidirectional", "qwen3_tts_talker", "recurrent_gemma", "roberta", "roformer", "sarvam_mla", "sarvam_moe", "seed_oss", "siglip_text", "smollm3", "solar_open", "splinter", "squeezebert", "stablelm", "starcoder2", "t5_encoder", "talkie", "t5gemma_encoder", "t5gemma2_encoder", "tapas", "tipsv2_text", "ultrabert", "unlimited_ocr_text", "vaultgemma", "visual_bert", "xglm", "xlm", "xlm_roberta_xl"}
    assert FORMATS.names() == ["transformer_lens", "transformer_bridge", "hf_model", "builtin", "toy", "native", "consolidated", "safetensors",
                             "gguf"]


def test_all_means_the_registry(monkeypatch):
    """A measure registered at run time is part of 'all' for the engine, with no other edit."""
    from compscope.measures import MEASURES, Measure, get_measure, register

    base = get_measure("overlap")
    monkeypatch.setattr(MEASURES, "_entries", dict(MEASURES._entries))
    register(Measure("overlap_twice", lambda p: 2 * base.exact(p), lambda g: 2 * base.from_gram(g), (0.0, 2.0),
                     "2 x overlap", frozenset(), gram_inputs=base.gram_inputs))
    t = compscope.scores("induction-2l", "K", "all", progress=False, pairs="all")
    assert "overlap_twice" in t.measures
    import torch

    torch.testing.assert_close(t.dense("overlap_twice", "K"), 2 * t.dense("overlap", "K"), equal_nan=True)


def test_a_format_is_asked_in_turn(monkeypatch, tmp_path):
    """load asks the registered formats in order; a new one needs one registration."""
    from compscope.loading.formats import FORMATS

    class Probe:
        @staticmethod
        def recognise(source):
            return isinstance(source, str) and source.endswith(".probe")

        @staticmethod
        def read(source):
            return compscope.load("induction-2l")

    monkeypatch.setattr(FORMATS, "_entries", dict(FORMATS._entries))
    FORMATS.add("probe", Probe)
    assert compscope.load("x.probe").n_layers == 2
    with pytest.raises(compscope.LoadError, match="not a local path, not a built-in model"):
        compscope.load("x.nothing")  # then, a hub id: not in the cache (tests run offline)


# ---------------------------------------------------------------- one place for each thing
def test_no_copies_of_factor_building_topk_or_kind_checks():
    """Factored circuits come from core.factors, top-k selection from results.table.top_entries,
    kinds checks from core.factors.check_kinds: no second copy in src/."""
    offenders = []
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        rel = str(path.relative_to(SRC))
        if ".topk(" in text and rel != "results/table.py":
            offenders.append(f"{rel}: topk")
        if "use letters from 'QKV'" in text and rel != "core/factors.py":
            offenders.append(f"{rel}: kinds check")
        if "rotary.rotate(" in text and rel not in ("core/factors.py", "core/attention.py", "core/heads.py"):
            offenders.append(f"{rel}: rotation of a factor")
        if ("W_O[" in text and "W_V[" in text and "LowRank(" in text) and rel != "core/factors.py":
            offenders.append(f"{rel}: builds W_OV")
    assert not offenders, offenders


#: standard-library names added after Python 3.10 (the "What's New" pages of 3.11-3.13), module -> names;
#: None: the whole module is new
NEWER_THAN_310 = {
    "tomllib": None, "wsgiref.types": None,
    "typing": {"Self", "LiteralString", "Never", "assert_never", "assert_type", "reveal_type", "TypeVarTuple",
               "Unpack", "Required", "NotRequired", "dataclass_transform", "override", "get_overloads",
               "clear_overloads", "TypeAliasType", "ReadOnly", "TypeIs", "get_protocol_members", "is_protocol"},
    "enum": {"StrEnum", "ReprEnum", "EnumCheck", "FlagBoundary", "verify", "member", "nonmember",
             "global_enum", "show_flag_values", "property", "EnumType"},
    "datetime": {"UTC"}, "contextlib": {"chdir"}, "operator": {"call"}, "hashlib": {"file_digest"},
    "math": {"cbrt", "exp2", "sumprod", "fma"}, "itertools": {"batched"}, "asyncio": {"TaskGroup", "timeout", "Runner"},
    "inspect": {"getmembers_static", "markcoroutinefunction"}, "logging": {"getLevelNamesMapping", "getHandlerByName"},
    "sys": {"exception", "monitoring", "_is_gil_enabled"}, "warnings": {"deprecated"}, "copy": {"replace"},
    "builtins": {"ExceptionGroup", "BaseExceptionGroup", "PythonFinalizationError"},
}


def _oldest_python() -> tuple[int, int]:
    import re

    text = (SRC.parents[1] / "pyproject.toml").read_text()
    major, minor = re.search(r'requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', text).groups()
    return int(major), int(minor)


def _newer_than_310(path: Path, root: Path = SRC.parents[1]) -> list[str]:
    """Where ``path`` uses a name of :data:`NEWER_THAN_310`: imported from its module, or read as
    ``module.name``, or (builtins) named; after parsing it with Python 3.10's grammar."""
    tree = ast.parse(path.read_text(), str(path), feature_version=(3, 10))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name in NEWER_THAN_310 and NEWER_THAN_310[a.name] is None]
        elif isinstance(node, ast.ImportFrom) and node.module in NEWER_THAN_310:
            new = NEWER_THAN_310[node.module]
            found += [f"from {node.module} import {a.name}" for a in node.names if new is None or a.name in new]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in (NEWER_THAN_310.get(node.value.id) or ()) and node.value.id != "builtins":
                found.append(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in NEWER_THAN_310["builtins"]:
            found.append(node.id)
    return [f"{path.relative_to(root)}:{w}" for w in found]


def test_the_package_and_benchmarks_are_python_310():
    """pyproject allows Python 3.10; this machine runs 3.11, so what 3.10 lacks is checked statically:
    the grammar (``ast.parse`` with ``feature_version``) and the standard library's newer names."""
    assert _oldest_python() == (3, 10)  # this test's list is of what came after 3.10
    files = sorted(SRC.rglob("*.py")) + sorted((SRC.parents[1] / "bench").glob("*.py"))
    assert len(files) > 100
    found = [w for f in files for w in _newer_than_310(f)]
    assert not found, found


def test_the_310_check_finds_newer_grammar_and_names(tmp_path):
    f = tmp_path / "newer.py"
    for source, expected in [("import tomllib\n", "import tomllib"), ("from typing import Self\n", "from typing import Self"),
                             ("import enum\nx = enum.StrEnum\n", "enum.StrEnum"), ("raise ExceptionGroup('x', [])\n", "ExceptionGroup")]:
        f.write_text(source)
        assert _newer_than_310(f, tmp_path) == [f"newer.py:{expected}"]
    f.write_text("import typing\nx: typing.Optional[int] = None\n")
    assert _newer_than_310(f, tmp_path) == []
    f.write_text("try:\n    pass\nexcept* ValueError:\n    pass\n")  # exception groups' grammar: 3.11
    with pytest.raises(SyntaxError):
        _newer_than_310(f, tmp_path)
