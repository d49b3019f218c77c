"""Task synthesis: turning data files into agent tasks (DataMind, EnvLunch, SciDataSailor pipelines)."""
