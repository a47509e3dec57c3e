"""Choices of the export a front end offers before anything heavy is imported (the CLI's parser)."""

EXTERNAL_DATA_CHOICES = ("auto", "always", "never")
