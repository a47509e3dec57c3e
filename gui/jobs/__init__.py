"""Running core work off the GUI thread: the worker (`Job`), the core calls the app runs as jobs
(Qt-free closures), and `JobRunner` (one main job at a time, "newest answer only" side jobs)."""
