"""The main window's pieces: the outputs tree and its model, the read-only panels, the report
view, the status bar's job display and the remembered app state (recent files, window layout)."""
