"""The model's sizes, a module beside train.py: the entry's own folder is importable."""
BATCH = 256
FEATURES = 256
HIDDEN = 512
LAYERS = 4
