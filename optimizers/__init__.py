"""The teleprompters of conf/optimizer (fit, logistic, finetune) and the compile guard."""
