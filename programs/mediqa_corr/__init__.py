"""MedReAct'N'MedReFlex for MEDIQA-CORR 2024, one file per agent."""

from programs.mediqa_corr.pipeline import MedReActNMedReFlex

__all__ = ["MedReActNMedReFlex"]
