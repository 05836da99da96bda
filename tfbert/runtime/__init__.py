"""Around the model: atomic files, owned run directories, the tools' errors and progress lines."""
