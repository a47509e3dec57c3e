"""Hugging Face model folders (config.json + safetensors) as export sources, loaded offline.

Contract: `describe_hf(folder, task)` -> `SourceInfo` (inputs as the tokenizer names them, the
parameters of the model class the task loads, the tasks on offer); `load_hf(folder, mode, task,
pooling)` -> `LoadedProgram` whose module takes the inputs positionally and returns the task
preset's outputs (see presets.py). Loading never touches the network (local_files_only=True on every call,
`local_files_only=True`), never runs code from the folder (`trust_remote_code=False`), and reads
weights from safetensors when present (a `.bin` is read with torch.load weights-only: a pickled
object in it is refused in one line, its code never runs). A folder is data, not a program: it
needs no `trust_code`.

Attention is loaded as the "eager" implementation: its dropout is an ordinary Dropout that a
training-mode export keeps (the SDPA kernel's dropout exports without a training flag, i.e. as
a no-op, and ORT's gradient builder cannot differentiate it).
"""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

from onnxport.core.io.kinds import SourceKind
from onnxport.core.pytorch.hf_files import check_json_files, check_requested_size, weight_files
from onnxport.core.pytorch.presets import TASKS, TEXT_INPUTS, default_task, get_preset, wrap_for_task
from onnxport.core.pytorch.program import (
    LoadedProgram,
    ParamInfo,
    SourceInfo,
    import_torch,
    read_json,
    text_input_specs,
)
from onnxport.core.pytorch.st_modules import SentenceSteps, sentence_steps
from onnxport.core.util.errors import OnnxportError, UnavailableError
from onnxport.core.util.text import first_line

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model", "sentencepiece.bpe.model")


def import_transformers():
    import_torch()
    try:
        import transformers
    except ImportError:
        raise UnavailableError("Hugging Face model folders need transformers: pip install 'onnxport[torch]'") from None
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


def _config(folder: Path):
    transformers = import_transformers()
    check_json_files(folder)  # transformers parses them itself: bounded before it does
    raw = read_json(folder / "config.json")
    if raw.get("auto_map"):
        raise OnnxportError(f"{folder}: the model needs its own Python code (auto_map in config.json); "
                            "onnxport does not run code from model folders")
    try:
        return transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except (ValueError, KeyError, OSError) as exc:
        raise OnnxportError(f"{folder}: config.json not understood by transformers ({first_line(exc)})") from None


def _task_config(folder: Path, task: str | None):
    """The config for `task` (None: the task the checkpoint was saved for)."""
    config = _config(folder)
    task = task or default_task(getattr(config, "architectures", None))
    if get_preset(task).name == "question-answering" and getattr(config, "num_labels", 2) != 2:
        config.num_labels = 2  # a span head has exactly two outputs (start, end)
    return config, task


def _weights(folder: Path) -> list[Path]:
    return weight_files(folder)  # each inside the folder, and every file an index names (hf_files)


def _auto_class(transformers, task: str | None):
    preset = get_preset(task)
    return preset, getattr(transformers, preset.auto_class)


def _input_names(folder: Path, config, model_cls) -> tuple[list[str], bool]:
    """Inputs as the tokenizer names them (if the folder has one), else from the model's forward."""
    forward = [p for p in inspect.signature(model_cls.forward).parameters if p in TEXT_INPUTS]
    if any((folder / f).exists() for f in TOKENIZER_FILES):
        transformers = import_transformers()
        try:
            tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                                             trust_remote_code=False)
            names = [n for n in tok.model_input_names if n in forward]
            if "input_ids" in names:
                return names, True
        except (ValueError, OSError, KeyError, TypeError):
            pass
    names = list(forward)
    if "token_type_ids" in names and (getattr(config, "type_vocab_size", 2) or 0) <= 1:
        names.remove("token_type_ids")
    return names, False


def _model_class(transformers, config, auto):
    try:
        return auto._model_mapping[type(config)]
    except KeyError:
        raise OnnxportError(f"{config.model_type} models have no {auto.__name__} class in transformers") from None


def describe_hf(folder: str | Path, task: str | None = None) -> SourceInfo:
    folder = Path(folder)
    transformers = import_transformers()
    torch = import_torch()
    config, task = _task_config(folder, task)
    weights = _weights(folder)
    preset, auto = _auto_class(transformers, task)
    cls = _model_class(transformers, config, auto)
    names, from_tokenizer = _input_names(folder, config, cls)
    with torch.device("meta"):
        skeleton = cls._from_config(config, attn_implementation="eager")
    tensors = [*skeleton.parameters(), *skeleton.buffers()]  # a config may not ask for more than the weights hold
    check_requested_size(folder, sum(t.numel() * t.element_size() for t in tensors), weights)
    params = [ParamInfo(n, tuple(p.shape), str(p.dtype).replace("torch.", "")) for n, p in skeleton.named_parameters()]
    params += [ParamInfo(n, tuple(b.shape), str(b.dtype).replace("torch.", ""), True)
               for n, b in skeleton.named_buffers()]
    notes = [] if from_tokenizer else ["no tokenizer in the folder: inputs taken from the model's forward()"]
    return SourceInfo(folder, SourceKind.HF_FOLDER,
                      text_input_specs(names, getattr(config, "vocab_size", None),
                                       getattr(config, "type_vocab_size", None)),
                      True, list(preset.outputs), params, task, TASKS, notes)


def load_hf(folder: str | Path, *, mode: str = "inference", task: str | None = None,
            pooling: str | None = None) -> LoadedProgram:
    folder = Path(folder)
    info = describe_hf(folder, task)
    transformers = import_transformers()
    config, _ = _task_config(folder, info.task)
    preset, auto = _auto_class(transformers, info.task)
    weights = _weights(folder)
    kwargs = {"local_files_only": True, "trust_remote_code": False, "output_loading_info": True,
              "attn_implementation": "eager", "config": config, "ignore_mismatched_sizes": True}
    if any(w.suffix == ".safetensors" for w in weights):
        kwargs["use_safetensors"] = True
    try:
        model, loading = auto.from_pretrained(str(folder), weights_only=True, **kwargs)
    except pickle.UnpicklingError:  # the weights-only unpickler met something other than tensors
        bins = ", ".join(w.name for w in weights if w.suffix == ".bin")
        raise OnnxportError(f"{folder}: {bins} holds pickled Python objects besides tensors; onnxport reads .bin "
                            "weights with weights_only=True and never runs pickled code",
                            hint="convert the weights to safetensors") from None
    except Exception as exc:  # transformers raises many kinds for a folder it cannot use
        raise OnnxportError(f"{folder}: transformers could not load the model ({first_line(exc)})") from None
    notes = list(info.notes)
    missing = list(loading.get("missing_keys") or []) + [
        m[0] if isinstance(m, tuple) else str(m) for m in loading.get("mismatched_keys") or []]
    if missing:
        notes.append(f"not in the checkpoint, randomly initialised for task '{info.task}': "
                     f"{', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")
    model.train(mode == "training")
    names = [s.name for s in info.inputs]
    steps = _sentence_steps(folder, pooling, notes) if preset.name == "pooling" else SentenceSteps()
    module = wrap_for_task(model, preset, names, pooling or steps.pooling or "mean", steps.normalize)
    return LoadedProgram(module, info, preset, prefix="model.", notes=notes)


def _sentence_steps(folder: Path, pooling: str | None, notes: list[str]) -> SentenceSteps:
    """The folder's sentence-transformers steps (pooling mode, Normalize), said in `notes`; a
    `pooling` the caller chose wins over the folder's."""
    steps = sentence_steps(folder)
    if steps.problem:
        notes.append(f"{steps.problem}: its sentence-transformers steps (e.g. Normalize) are not applied")
    if steps.unapplied:
        notes.append(f"sentence-transformers steps not applied: {', '.join(steps.unapplied)}; the embeddings "
                     "may differ from sentence-transformers'")
    if steps.pooling and pooling and pooling != steps.pooling:
        notes.append(f"{pooling} pooling as asked, where the folder's sentence-transformers Pooling uses "
                     f"{steps.pooling}")
    elif steps.pooling:
        notes.append(f"{steps.pooling} pooling, as the folder's sentence-transformers Pooling says")
    if steps.normalize:
        notes.append("embeddings L2-normalised, as the folder's sentence-transformers Normalize module does")
    return steps
