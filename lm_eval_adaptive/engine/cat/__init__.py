"""One model under test: the examinee, item selection, ability estimation, person fit, the single-model stopping rules, the full-task estimate."""
