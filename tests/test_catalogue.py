"""The catalogue of what compscope reads (``compscope models``, ``docs/models.md``), and the refusals
of the architectures it knows and does not read, each with its reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import safetensors.torch
import torch

import compscope
from compscope.cli.main import main
from compscope.loading import catalogue
from compscope.loading.families import families, family_for
from compscope.loading.formats import gguf as gguf_format

DOC = Path(__file__).resolve().parent.parent / "docs" / "models.md"


def test_every_family_says_what_it_reads_and_none_is_also_refused():
    entries = catalogue.families()
    assert [e.family for e in entries] == sorted(families())
    for e in entries:
        assert e.about.strip(), f"family {e.family} has no 'about' line"
        assert not set(e.model_types) & set(catalogue.NOT_READ), e.family
        assert set(e.gguf_on_data) <= set(e.gguf)
    assert not set(catalogue.GGUF_NOT_READ) & set(gguf_format.ARCHS)  # a GGUF architecture read and refused
    assert not set(catalogue.GGUF_ARCH_NOT_READ) & {*gguf_format.ARCHS, *catalogue.GGUF_NOT_READ}
    assert set(catalogue.GGUF_NOT_READ.values()) <= set(catalogue.NOT_READ)
    read = [t for e in entries for t in e.model_types]
    assert len(read) == len(set(read)), "a model_type listed by two families"


def test_the_gguf_architectures_are_those_the_format_reads_and_on_data_those_transformers_reads():
    """Every architecture of the GGUF reader's table appears under the family its model_type names, and under the
    family of the model_type some of its files are read as (Baichuan's of 40 layers: llama_alibi), there alone;
    'on data' is exactly transformers' GGUF reader's list (where transformers is installed)."""
    entries = catalogue.families()
    listed = {(a, e.family) for e in entries for a in e.gguf}
    also = {(a, family_for({"model_type": t}, "test").name) for a, (t, _) in gguf_format.ALSO_READ_AS.items()}
    assert also == {("baichuan", "llama_alibi")}
    assert listed == {(arch, family_for({"model_type": model_type}, "test").name)
                      for arch, (model_type, *_rest) in gguf_format.ARCHS.items()} | also
    reads = gguf_format.transformers_reads()
    on_data = {a for e in entries for a in e.gguf_on_data}
    assert on_data == (set() if reads is None else set(gguf_format.ARCHS) & reads)
    if reads is not None:
        assert {"llama", "qwen2", "gemma3"} <= on_data and not {"bert", "gemma", "olmo2"} & on_data


def test_the_refused_model_types_are_ones_transformers_names():
    """A typo in the table would refuse nothing: every key is a model_type of the installed
    transformers, where it has that model."""
    transformers = pytest.importorskip("transformers")
    from transformers import CONFIG_MAPPING

    newer = {"deepseek_v32", "deepseek_v4", "glm4_moe_lite", "glm_moe_dsa", "kimi_k25", "gemma4", "gemma4_text",
             "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "minicpm3", "kimi_linear", "youtu",
             "bailing_hybrid", "dots3_note_text", "axk1", "laguna", "beam", "zaya", "dory",
             "mllama_text_model", "axk2", "mistral4", "mistral_large4", "hy_v4", "hrm_text",
             "glm5_next_text", "inkling_text", "inkling2_text", "neomme", "muse_spark_text", "qwen4_exp_text",
             "diffusion_gemma_text", "step3p5", "gemma4_assistant", "gemma4_unified_assistant", "mistral_large4_text",
             "muse_glimmer_assistant", "t5gemma2", "t5gemma2_text", "inkling2_loop", "inkling2_loop_text",
             "hunyuan_vl_text", "hy_v4_vl_text", "minimax_m3_vl_text", "kosmos_2_text_model",
             "voxtral_realtime", "voxtral_realtime_text", "sam3_lite_text_text_model", "videoprism_text_model",
             "t5gemma2_decoder", "pp_formulanet_text", "qwen3_omni_moe_talker_text", "wavtokenizer", "canary",
             "canary_decoder", "cohere_asr", "moonshine_streaming", "timesfm2_5", "pi0",
             # (transformers 5.25's, which 5.24 lacks)
             "ergo", "kolibri1_1", "pi05",
             # (sub-configs that transformers 5's auto mapping names, 4.57's not)
             "flava_text_model", "layoutxlm", "musicgen_decoder", "musicgen_melody_decoder", "pix2struct_text_model",
             "blip_text_model", "csm_depth_decoder_model", "dia_decoder", "moshi_depth", "qwen2_5_omni_talker",
             "clvp_decoder", "clvp_encoder", "blt_local_encoder", "blt_local_decoder", "blt_global_transformer",
             "blt_patcher",
             "t5_gemma_module"}
    unknown = {t for t in catalogue.NOT_READ if t not in CONFIG_MAPPING}
    if transformers.__version__.split(".")[0] == "4":  # 4.57 predates these
        unknown -= newer
    elif not hasattr(transformers, "ErgoConfig"):  # (before 5.25)
        unknown -= {"ergo", "kolibri1_1", "pi05"}
        from compscope.data.runner import transformers_at_least

        if not transformers_at_least(5, 24):  # (newer types unknown there: the list is checked on 4.57 and 5.24 on)
            pytest.skip(f"transformers {transformers.__version__} predates model types compscope names")
    assert not unknown


def _folder(tmp_path: Path, model_type: str) -> Path:
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, "architectures": ["X"]}))
    safetensors.torch.save_file({"x": torch.zeros(2)}, folder / "model.safetensors")
    return folder


@pytest.mark.parametrize("model_type", ["axk2", "cpmant", "gemma3n_text", "hunyuan_v1_dense", "t5gemma2_text", "paligemma",
                                        "mobilebert", "musicgen_melody", "blip", "blip_text_model"])
def test_a_known_architecture_is_refused_with_its_reason(tmp_path, model_type):
    with pytest.raises(compscope.UnsupportedModelError) as e:
        compscope.load(_folder(tmp_path, model_type))
    msg = str(e.value)
    assert f"model_type='{model_type}'" in msg and "which compscope does not read" in msg
    assert catalogue.NOT_READ[model_type] in msg and "\n" not in msg


def test_an_unknown_architecture_gets_the_nearest_names_and_where_to_look(tmp_path):
    with pytest.raises(compscope.UnsupportedModelError) as e:
        compscope.load(_folder(tmp_path, "qwen3x"))
    msg = str(e.value)
    assert "unsupported architecture (model_type='qwen3x'" in msg and "did you mean qwen3" in msg
    n = sum(len(f.model_types) for f in families().values())
    assert f"`compscope models` lists the {n} model types compscope reads" in msg


def _header_only_gguf(folder: Path, arch: str) -> Path:
    """A GGUF file of architecture ``arch`` with one block and a token embedding: enough header to look up."""
    gguf = pytest.importorskip("gguf")
    path = folder / "m.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", torch.zeros(4, 8).numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("arch, reason", [("dbrx", "q, k and v are clipped to [-clip_qkv, clip_qkv]"),
                                         ("step35", "Step 3.5 and 3.7's language model: its sliding layers have a "
                                                    "query head count of their own"),
                                         ("neo-bert", "NeoBERT: llama.cpp splits its fused qkv into all the queries"),
                                         ("clip", "a multimodal projector file (mmproj"),
                                         ("wavtokenizer-dec", "WavTokenizer, an audio codec: its decoder turns codes")])
def test_a_gguf_file_of_a_known_architecture_is_refused_with_its_reason(tmp_path, arch, reason):
    path = _header_only_gguf(tmp_path, arch)
    with pytest.raises(compscope.UnsupportedModelError) as e:
        compscope.load(path)
    assert f"GGUF architecture '{arch}', which compscope does not read: {reason}" in str(e.value)


def test_a_gguf_file_whose_layout_is_not_mapped_is_refused_with_its_reason(tmp_path):
    """An architecture read from its HuggingFace folders but not from llama.cpp's layout of it."""
    with pytest.raises(compscope.UnsupportedModelError) as e:
        compscope.load(_header_only_gguf(tmp_path, "gptj"))
    assert "GGUF architecture 'gptj'" in str(e.value)
    assert "reads this model from its HuggingFace folder; llama.cpp names the architecture but builds no model" in \
        str(e.value)


def test_lookup_answers_for_model_types_gguf_architectures_and_wrappers():
    read, line = catalogue.lookup("mistral")
    assert read and line.startswith("mistral: model_type 'mistral', read by the llama family (")
    read, line = catalogue.lookup("qwen2")  # both a model_type and a GGUF architecture
    assert read and "model_type 'qwen2', read by the llama family" in line
    on_data = "qwen2" in (gguf_format.transformers_reads() or ())
    assert f"GGUF architecture 'qwen2', read by the llama family ({'also on data' if on_data else 'weights only'}" in line
    read, line = catalogue.lookup("gptj")  # (a model_type read, whose GGUF files are not)
    assert read and "model_type 'gptj', read by the gptj family" in line
    assert line.endswith("; GGUF architecture 'gptj', not read: compscope reads this model from its HuggingFace "
                         "folder; llama.cpp names the architecture but builds no model of it (its loader refuses such "
                         "a file), so no layout of its tensors is defined to read")
    assert "GGUF architecture" not in catalogue.lookup("gptj", only="model_type")[1]
    read, line = catalogue.lookup("olmo2")
    assert read and "GGUF architecture 'olmo2', read by the olmo2 family (weights only" in line
    read, line = catalogue.lookup("hunyuan_vl")  # (a GGUF architecture alone, not read)
    assert not read and line == f"hunyuan_vl: not read: {catalogue.NOT_READ['hunyuan_vl_text']}"
    read, line = catalogue.lookup("mimo2")  # (a GGUF architecture alone, read)
    assert read and line == "mimo2: GGUF architecture 'mimo2', read by the mimo_v2_flash family (weights only: " \
        "transformers' GGUF reader does not read it)"
    read, line = catalogue.lookup("baichuan")  # (some files of it, by their depth, read by another family)
    assert read and line == ("baichuan: GGUF architecture 'baichuan', read by the llama family (weights only: "
                             "transformers' GGUF reader does not read it); GGUF architecture 'baichuan' at 40 layers "
                             "(Baichuan 13B, ALiBi), read by the llama_alibi family (weights only: transformers' GGUF "
                             "reader does not read it)")
    read, line = catalogue.lookup("llama_alibi")  # (the name GGUF files are read as is no model_type)
    assert not read and "not a model_type or GGUF architecture compscope knows" in line
    read, line = catalogue.lookup("nonesuch")
    assert not read and "not a model_type or GGUF architecture compscope knows (" in line  # (nothing close)
    read, line = catalogue.lookup("ultrabrt")  # a misspelling: the names it is close to
    assert not read and "compscope knows; did you mean ultrabert or flaubert or eurobert?" in line


def test_lookup_reads_a_vision_language_model_by_its_language_model():
    pytest.importorskip("transformers")
    read, line = catalogue.lookup("llama4")  # a model_type (the multimodal wrapper) and a GGUF architecture
    assert read and "model_type 'llama4': its language model, llama4_text, read by the llama4 family" in line
    assert "GGUF architecture 'llama4', read by the llama4 family (weights only" in line
    # an encoder-decoder's decoder is no text_config (its cross-attention reads the encoder): refused with its reason
    read, line = catalogue.lookup("vision-encoder-decoder")
    assert not read and line == f"vision-encoder-decoder: not read: {catalogue.NOT_READ['vision-encoder-decoder']}"
    assert "the decoder's cross-attention reads the encoder's output" in line
    read, line = catalogue.lookup("vit")  # a vision model: transformers knows it, compscope reads none of it
    assert not read and line.startswith("vit: not read: a model_type transformers knows (ViTConfig) that no compscope")
    read, line = catalogue.lookup("llava")
    assert read and "model_type 'llava': its language model, llama, read by the llama family" in line
    read, line = catalogue.lookup("clip")  # a dual encoder: its text encoder is what is read
    assert read and "model_type 'clip': its text encoder, clip_text_model, read by the clip_text family" in line
    read, line = catalogue.lookup("paligemma")  # a wrapper refused as a whole, its language model read alone
    assert not read and line == f"paligemma: not read: {catalogue.NOT_READ['paligemma']}"
    read, line = catalogue.lookup("kimi_k25")  # its language model is DeepSeek-V3's
    if "kimi_k25" in __import__("transformers").CONFIG_MAPPING:
        assert read and "model_type 'kimi_k25': its language model, deepseek_v3, read by the deepseek_v3 family" in line
    if "qwen4_exp" in __import__("transformers").CONFIG_MAPPING:  # one whose language model's own type is refused
        read, line = catalogue.lookup("qwen4_exp")
        assert not read and line == f"qwen4_exp: not read: its language model, qwen4_exp_text: {catalogue.NOT_READ['qwen4_exp_text']}"


def test_the_models_command(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in families():
        assert re.search(rf"^  {re.escape(name)} ", out, re.M), name
    assert "induction-2l" in out and "axk2" in out
    assert main(["models", "qwen3", "axk2"]) == 1  # one is not read
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("qwen3: model_type 'qwen3', read by the qwen3 family")
    assert lines[1] == f"axk2: not read: {catalogue.NOT_READ['axk2']}"
    assert main(["models", "gemma3_text"]) == 0
    assert main(["models", "--markdown", "llama"]) == 2
    assert "--markdown writes the whole catalogue" in capsys.readouterr().err


def test_docs_models_md_is_what_the_command_writes():
    """``docs/models.md`` is ``compscope models --markdown``'s output: regenerate it when a family,
    its line or a refusal changes. Its GGUF 'on data' column is the transformers it names."""
    doc = DOC.read_text()
    said = re.search(r"transformers' GGUF reader \((transformers [^)]*)\)", doc)
    assert said, "docs/models.md does not say which transformers it was written with"
    if said.group(1) != catalogue._transformers_said():
        pytest.skip(f"docs/models.md was written with {said.group(1)}, this is {catalogue._transformers_said()}")
    assert doc == catalogue.markdown(), "docs/models.md is stale: compscope models --markdown > docs/models.md"


def test_models_looks_up_a_folder_or_gguf_file_by_what_its_files_state(tmp_path, capsys):
    """``compscope models PATH``: a folder by its config.json's model_type, a .gguf file by its header's
    architecture (as a GGUF architecture alone); a folder without a config or with no model_type says so."""
    path = _header_only_gguf(tmp_path, "gemma")  # read for the weights; transformers' GGUF reader does not read it
    read, line = catalogue.lookup_files(path)
    assert read and line == f"{path}: gemma: GGUF architecture 'gemma', read by the gemma family (weights only: " \
                            "transformers' GGUF reader does not read it)"
    folder = _folder(tmp_path, "axk2")
    read, line = catalogue.lookup_files(folder)
    assert not read and line == f"{folder}: axk2: not read: {catalogue.NOT_READ['axk2']}"
    (folder / "config.json").write_text(json.dumps({"architectures": ["X"]}))
    assert catalogue.lookup_files(folder) == (False, f"{folder}: config.json's model_type is None")
    (folder / "config.json").unlink()
    with pytest.raises(compscope.LoadError, match="no config.json, so no model_type to look up"):
        catalogue.lookup_files(folder)
    assert main(["models", str(path), "qwen3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}: gemma: GGUF architecture") and out[1].startswith("qwen3: model_type 'qwen3'")
    assert main(["models", ""]) == 1
    assert capsys.readouterr().out.startswith("'': not a model_type")


def test_models_looks_up_a_model_class_by_its_model_type(capsys):
    """A model class's name (what a config's ``architectures`` or a model card names) answers as its model type:
    a class several model types run (``LlamaForCausalLM``, which EXAONE 3 runs as well) as the one whose config class
    it is named after; a class compscope's families list but no auto mapping names (``T5EncoderModel``) too."""
    read, line = catalogue.lookup("BartForConditionalGeneration")
    assert read and line.startswith("BartForConditionalGeneration: a model class of model_type 'bart', read by the "
                                    "bart_encoder family (")
    read, line = catalogue.lookup("LlamaForCausalLM")
    assert read and line.startswith("LlamaForCausalLM: a model class of model_type 'llama', read by the llama family")
    assert catalogue.lookup("T5EncoderModel")[1].startswith("T5EncoderModel: a model class of model_type 't5', read by")
    assert catalogue.lookup("NoSuchForCausalLM")[1].startswith("NoSuchForCausalLM: not a model_type")
    assert main(["models", "MarianMTModel"]) == 0
    assert capsys.readouterr().out.startswith("MarianMTModel: a model class of model_type 'marian', read by the "
                                              "marian_encoder family")
    pytest.importorskip("transformers")  # (a class no family lists: by transformers' auto mappings)
    read, line = catalogue.lookup("FalconMambaForCausalLM")
    assert not read and line == ("FalconMambaForCausalLM: a model class of model_type 'falcon_mamba'; not read: "
                                 f"{catalogue.NOT_READ['falcon_mamba']}")
    from transformers import CONFIG_MAPPING

    if "EvollaModel" in CONFIG_MAPPING:  # (transformers maps the class's name to Evolla's config too: its model type)
        read, line = catalogue.lookup("EvollaModel")
        assert read and line.startswith("EvollaModel: a model class of model_type 'evolla', read by the evolla family")


def test_models_looks_up_a_hub_id_by_its_cached_config(tmp_path):
    """``compscope models owner/name[@revision]``: the config.json of the local cache (a snapshot holding nothing
    else), by its model_type; an id or revision not cached says so with the cache folder (offline: nothing is
    downloaded). Through the command line too, its cache named by HF_HUB_CACHE."""
    import os
    import subprocess
    import sys

    pytest.importorskip("huggingface_hub")
    repo = tmp_path / "models--Test--tiny-bart"
    commit = "c" * 40
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps({"model_type": "bart"}))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    read, line = catalogue.lookup_hub("Test/tiny-bart", cache_dir=tmp_path)
    assert read and line.startswith("Test/tiny-bart: bart: model_type 'bart', read by the bart_encoder family")
    read, line = catalogue.lookup_hub("Test/tiny-bart@v9", cache_dir=tmp_path)
    assert not read and line == (f"Test/tiny-bart@v9: its config.json is not in the HuggingFace cache {tmp_path} "
                                 "(HF_HUB_OFFLINE is set, so nothing is downloaded)")
    (repo / "snapshots" / commit / "config.json").write_text(json.dumps({"model_type": "axk2"}))
    read, line = catalogue.lookup_hub("Test/tiny-bart", cache_dir=tmp_path)
    assert not read and line == f"Test/tiny-bart: axk2: not read: {catalogue.NOT_READ['axk2']}"
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "compscope.cli.main", "models", "Test/tiny-bart", "Test/other"],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    out = run.stdout.splitlines()
    assert out[0].startswith("Test/tiny-bart: axk2: not read") and out[1].startswith(
        "Test/other: its config.json is not in the HuggingFace cache")


def test_models_downloads_a_hub_ids_config_alone_where_allowed(tmp_path, monkeypatch):
    """Not cached and ``HF_HUB_OFFLINE`` unset: ``config.json`` alone is asked of the hub (no other file), and the
    answer is by its model_type; a failed download is said in our own sentence (huggingface_hub stood in for: no
    network here)."""
    hub = pytest.importorskip("huggingface_hub")
    from test_hub import _unreachable

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "marian"}))
    asked = []

    def download(repo_id, filename, revision=None, cache_dir=None, local_files_only=False):
        asked.append((repo_id, filename, revision, local_files_only))
        if local_files_only:
            raise hub.errors.LocalEntryNotFoundError("not cached")
        return str(config)

    monkeypatch.setattr(hub, "hf_hub_download", download)
    read, line = catalogue.lookup_hub("Helsinki-NLP/opus-mt-en-de@v2")
    assert read and line.startswith("Helsinki-NLP/opus-mt-en-de@v2: marian: model_type 'marian', read by the "
                                    "marian_encoder family")
    assert asked == [("Helsinki-NLP/opus-mt-en-de", "config.json", "v2", True),
                     ("Helsinki-NLP/opus-mt-en-de", "config.json", "v2", False)]

    def unreachable(repo_id, filename, revision=None, cache_dir=None, local_files_only=False):
        raise _unreachable()

    monkeypatch.setattr(hub, "hf_hub_download", unreachable)
    read, line = catalogue.lookup_hub("Org/gone")
    assert not read and line.startswith("Org/gone: its config.json cannot be read: the hub cannot be reached "
                                        "(ConnectionError")
