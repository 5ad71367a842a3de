"""Numerical core of the attnlimits workflow.

Pure, vectorised functions (numpy/scipy, no file I/O, no torch) that implement the quantities of
Mudarisov et al., "Limitations of Normalization in Attention Mechanism" (NeurIPS 2025).
Arrays follow one convention: a leading sample axis S (one sample = one chunk x layer x head x L),
then the key axis L, then the embedding axis d.

Model-facing code (torch) lives in :mod:`attnlimits.extraction` and the modules it draws on
(:mod:`attnlimits.attention_capture`, :mod:`attnlimits.rule_attention`,
:mod:`attnlimits.model_structure`), which are imported explicitly so that analysis jobs never pay
for importing torch.
"""

__version__ = "0.1.0"
