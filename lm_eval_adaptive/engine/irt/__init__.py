"""The measurement model: response models, item banks and their calibration (continuous and 0/1), the factor model, the checks on every score and cost."""
