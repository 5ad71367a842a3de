"""The normalizer study's limits and verdict words: each limit of the paper, the study's measure
of it and which way the measure relaxes it, stated once with the paper's own sentence and section
(:data:`LIMITS`); the verdicts (attnlimits_workflow.study) and the page
(attnlimits_workflow.assemble.study_prose) both read them from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RELAXES, TIGHTENS, NO_CHANGE = "relaxes", "tightens", "no change"
NOT_MEASURED = "not measured"
UNDECIDED = "undecided (known to an interval: censored, or a list cell)"
NO_VERDICT = "no verdict: both readings defensible"
# A sparse rule's rows with fewer nonzero weights than N: its top-N weight-0 tokens are never
# distinguishable, so N_s/N <= support / N measures the support, not separability.
SUPPORT_LIMITED = "no verdict: support < N"
# A rule whose rows hold exact zero weights: the critical N then depends on how a zero-weight
# token counts (analysis.zero_weight). Under "not_selected" a random set that draws one adds
# ||s|| to the expectation, a top-N set at N < support never does, so N_crit moves with the
# reading, not the model (sa_softmax: 2 evaluations to "censored" at every L; "literal": the
# baseline's N_crit). The share of rows with a zero weight above which no verdict is given.
ZERO_WEIGHT_ROWS_SHARE = 0.05
ZERO_WEIGHT_DISTANCE = (
    "no verdict: weights <= 0 or negligible (the zero-weight reading decides N_crit)"
)
# A fixed temperature T0 is a rescaling of W_q that training absorbs: the low-temperature
# sensitivity taken with respect to the raw scores then reports T0, not the rule.
FIXED_TEMPERATURE = "no verdict: a fixed temperature (training absorbs it into W_q)"
# Each rule's T ||J|| has its own ceiling at a tie (softmax 1/2, sparsemax and the entmaxes 1):
# a low-T verdict in the direction the ceilings differ could come from the ceiling alone.
CEILING = "no verdict: its T ||J|| ceiling differs from the baseline's"
# A decided interval verdict with no p-value (a side mixing a share of 0 or 1, or a measure of
# 0, with finite values): no place in Benjamini-Hochberg's family, so withheld.
NO_P_VALUE = "no verdict: no p-value (a boundary value on some seeds, not all)"
VERDICTS = (
    RELAXES,
    TIGHTENS,
    NO_CHANGE,
    UNDECIDED,
    NO_VERDICT,
    SUPPORT_LIMITED,
    ZERO_WEIGHT_DISTANCE,
    FIXED_TEMPERATURE,
    CEILING,
    NO_P_VALUE,
    NOT_MEASURED,
)
# The share of a row's top-N slots that may have weight 0 before N_s/N counts the support.
SUPPORT_LIMITED_SHARE = 0.05
# Section 5 of the paper: "it's better to avoid using the T <= 0.1"; Section 3.3: below 0.1 the
# curves follow the 1/T law. The sweep's temperatures at or below it are the low-T region.
LOW_TEMPERATURE = 0.1


@dataclass(frozen=True)
class Quote:
    """A sentence of the paper, verbatim (tests check it against the text), and its section."""

    text: str
    section: str


@dataclass(frozen=True)
class Limit:
    """One limit of the paper, the study's measure of it, and which way the measure relaxes it:
    "larger", "smaller", or "either" (both readings defensible: shown, no verdict, ``reason``);
    ``when``: the use that needs it relaxed (:func:`which_rule_when`)."""

    title: str
    header: str  # the table column: format fields l_max, n_max, c_max, t_low
    measure: str
    relaxes: Literal["larger", "smaller", "either"]
    quotes: tuple[Quote, ...]
    reason: str = ""
    # the "which rule to use when" summary's lead: the use that needs this limit relaxed
    when: str = ""
    # measured on the attention weights (False: on the model's predictions, the length limit)
    of_weights: bool = True
    # a share in [0, 1]: compared on the odds x / (1 - x), so that a baseline above 1 / ratio
    # still leaves room to relax it (on the shares, 0.7 could only "relax" to 1.05)
    share: bool = False


LIMITS: dict[str, Limit] = {
    "vanishing": Limit(
        "Vanishing attention (Lemma 1)",
        "Vanishing attention (Lemma 1): decay of the median max weight over L = {l_lo}..{l_hi},"
        " (L_hi / L_lo)^slope",
        "the log-log slope b of the median largest weight of a row over the analysed L within "
        "the training context (Lemma 1's rate, not a level), as the factor (L_hi / L_lo)^b it "
        "implies: 1 no decay, L_lo / L_hi the 1/L of Lemma 1",
        "larger",
        (
            Quote(
                "This lemma implies that for any normalization of function independent of "
                "token count, the attention weights inevitably become uniformly small (on the "
                "order of $1/L$) as the context size grows.",
                "2 (Lemma 1)",
            ),
        ),
        when="a few tokens must keep large weights at long contexts",
    ),
    "distance": Limit(
        "Distance collapse (Theorem 1, critical N)",
        "Distance collapse (Thm 1): mean N_crit / L",
        "mean over L of N_crit / L, each the first pass of Algorithm 3's N list read as its "
        "cell; a censored L (no N of the list passed, up to N = L - 1) counts as 1 (N_crit = L "
        "where every key has a weight > 0)",
        "larger",
        (
            Quote(
                "The critical- N curve grows sub-linearly ($\\approx 0.06L$), confirming that "
                "only a small subset of tokens can be separated before attention behaves as if "
                "weights were uniform.",
                "3.1",
            ),
        ),
        when="the selected tokens must stay distinguishable over a larger share of the context",
        share=True,
    ),
    "separability": Limit(
        "Separability (Theorem 2)",
        "Separability (Thm 2): mean N_s/N at N = {n_max}",
        "mean N_s / N at the largest N of the separability grid",
        "larger",
        (
            Quote(
                "Thus—even with idealised spherical embeddings—softmax attention cannot cleanly "
                "separate more than about four-fifths of the tokens it selects; adding further "
                "tokens mainly dilutes the representation without improving geometric "
                "resolution.",
                "3.2",
            ),
        ),
        when="many selected tokens must stay geometrically separable",
        share=True,
    ),
    "gradient": Limit(
        "Gradient at the trained temperature (Lemma 2)",
        "Gradient at trained T (Lemma 2): median ||J|| at L = {l_max}",
        "median ||d weights / d logits||_2 at the largest L, the model as trained",
        "either",
        (
            Quote(
                "Its limitations, however, are now well established: it produces dense "
                "distributions, its peak value drops as the context grows (*vanishing-attention* "
                "effect), and its Jacobian explodes when the temperature is driven low, yielding "
                "unstable gradients.",
                "4",
            ),
            Quote(
                "The resulting gradients are too small for effective learning, especially in "
                "long-context settings [4, 19].",
                "1",
            ),
            Quote(
                "*Gradient-controlled variants* (e.g. Self-Adjusted Softmax) re-weight logits "
                "according to the layer-wise dynamic range, keeping the Jacobian spectrum in a "
                "healthy band [20].",
                "4",
            ),
        ),
        reason=(
            "a larger ||J|| is nearer the low-temperature instability (Section 4), a smaller one "
            "nearer the too-small gradients of vanishing attention (Section 1); the paper asks "
            "for a healthy band, and one norm at one temperature cannot say which side of it a "
            "rule is on. The low-temperature sensitivity has its own column."
        ),
        when="gradients must stay in a healthy band at the trained temperature",
    ),
    "gradient_low_t": Limit(
        "Gradient sensitivity at low temperature (Corollary 3)",
        "Gradient sensitivity (Cor. 3): mean T ||J|| over T <= {t_low:g}",
        f"mean T x ||d rule(z / T) / d z||_2 over the sweep's rows at T <= {LOW_TEMPERATURE:g}"
        " (which T leads it depends on the rows: the text below says it for the baseline; the"
        " largest reaches each rule's own ceiling, the median vanishes with the one-hot rows)",
        "smaller",
        (
            Quote(
                "A smaller temperature T sharpens the softmax but simultaneously inflates the "
                "Jacobian norm (scaling as $1/T$), making the attention distribution highly "
                "sensitive to even tiny logit perturbations and thus harder to train stably.",
                "2.3 (Corollary 3)",
            ),
            Quote(
                "The teoretical and practical analysis shows that it’s better to avoid using "
                "the $T \\leq 0.1$.",
                "5",
            ),
        ),
        when="attention must be sharp (a low temperature) and still train stably",
    ),
    "length": Limit(
        "Length generalisation (Scalable-Softmax's claim)",
        "Length generalisation: ppl(C) / ppl({c_max}), last positions",
        "held-out perplexity at the training context over that at the longest context, last "
        "positions of each window",
        "larger",
        (
            Quote(
                "Our GPT-2 experiment (Fig. 2, middle) confirms the predicted plateau and "
                "justifies why sparse or length-aware rules can improve long-context "
                "performance.",
                "4",
            ),
        ),
        when="the model must read contexts longer than it was trained on",
        of_weights=False,
    ),
}
NO_DIFFERENCE = "no difference shown"
ONE_SEED = "no interval (one seed)"
HIGHER, LOWER = "higher", "lower"
# The measures shown beside the limits, with no orientation of the paper's: the cost and the sink.
BESIDE = ("perplexity", "sink")
