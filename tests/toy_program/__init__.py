"""A toy fourth program, defined entirely inside tests/: proof that the program contract is the only seam.

Fever tagging: does a short clinical note say the patient had a fever? One DSPy signature, one stage, its own data
format (JSONL), submission format (TSV), scorer (accuracy), config (conf/program/fever.yaml), served and reported
through the generic runners. tests/test_toy_program.py runs it through main.py with
`hydra.searchpath=[file://tests/toy_program/conf]` and changes nothing outside tests/.
"""
