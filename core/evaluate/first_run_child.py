"""The child side of first_run.py: run models once on candidate feeds, in a process that may die.

Run by util.child_call (`start_child("onnxport.core.evaluate.first_run_child:run", job)`); it
imports numpy and onnxruntime only, so it starts fast. The job is `{"models": [{"path": p,
"external_folder": f (optional)}], "trials": [.npz paths], "start": i}` (`external_folder`: where a
model written without its weights finds them). For each trial from `start` it sends one message
before running (`{"trial": i, "event": "start"}`) and one after (`"ok"`, or `"error"` with ORT's
first line), and stops at the first trial every model runs. A model whose inputs the feed does not
cover (a reference fed with parameters) is skipped. A model that does not load ends the job with
`"load"`: the parent's own session says why. The parent reads a crash (SIGFPE, SIGSEGV) from the
exit status and the last `start` message (each message is flushed before the run it announces).
"""

_TYPES = {"float": "float32", "double": "float64", "bool": "bool"}


def _first_line(exc: BaseException, limit: int = 600) -> str:
    """As util/text.first_line (this file imports nothing of onnxport): a long line keeps its end."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[:limit // 3 - 5] + " ... " + line[-(limit - limit // 3):]


def run(job: dict, data: bytes, channel) -> None:
    """See the module docstring (`data` is unused: the feeds are files the parent wrote)."""
    import numpy as np
    import onnxruntime as ort

    def emit(**event) -> None:
        channel.send(event)

    options = ort.SessionOptions()
    options.log_severity_level = 4
    sessions = []
    for entry in job["models"]:
        path, folder = entry["path"], entry.get("external_folder")
        try:
            own = options
            if folder:
                own = ort.SessionOptions()
                own.log_severity_level = 4
                own.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
            sessions.append(ort.InferenceSession(path, own, providers=["CPUExecutionProvider"]))
        except Exception as exc:  # noqa: BLE001 - any load failure: the parent's session reports it
            emit(event="load", model=path, message=_first_line(exc))
            return
    for i in range(job["start"], len(job["trials"])):
        with np.load(job["trials"][i], allow_pickle=False) as npz:
            feed = {k: npz[k] for k in npz.files}
        emit(trial=i, event="start")
        try:
            for sess in sessions:
                inputs = sess.get_inputs()
                if any(inp.name not in feed for inp in inputs):
                    continue
                sess.run(None, {inp.name: _cast(feed[inp.name], inp.type, np) for inp in inputs})
        except Exception as exc:  # noqa: BLE001 - ORT's Fail/InvalidArgument/...: try the next trial
            emit(trial=i, event="error", message=_first_line(exc))
            continue
        emit(trial=i, event="ok")
        return


def _cast(value, ort_type: str, np):
    name = ort_type[len("tensor("):-1] if ort_type.startswith("tensor(") else ""
    name = _TYPES.get(name, name)
    try:
        want = np.dtype(name)
    except TypeError:
        return value
    return value if value.dtype == want else value.astype(want)
