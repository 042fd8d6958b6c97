"""Certificates: exact witnesses for the paper's generic claims, exact counterexamples for universal ones.

A *generic* claim ("for almost every X, P(X)") whose bad set is the zero set of
a polynomial or real-analytic function on a connected domain is certified by
one exact witness outside the bad set (:mod:`symtrans.certify.linear`,
:mod:`symtrans.certify.softmax`). A *universal* claim ("under H, P") is searched
for counterexamples over structured families, each candidate decided in exact
arithmetic (:mod:`symtrans.certify.layernorm`, :mod:`symtrans.certify.search`).
This package holds the mathematics only: the producers that turn it into
:class:`symtrans.evidence.Evidence` of kind ``symbolic`` live with their
claim's numeric checks in the section modules of :mod:`symtrans.producers`
(only exact computations may yield ``certified``), and :mod:`symtrans.certify.seal`
writes a certificate dict from the statement registry. The exact
engine is python-flint (:mod:`symtrans.certify.exact`); :mod:`symtrans.certify.real`
certifies at real sizes on a checkpoint's weights, and the records carry
certificate dicts that the independent checker, a package of its own
(:mod:`symtrans.checker`), re-checks (``symtrans verify``); certify imports
its statement registry, the checker imports nothing of certify.

Nothing here imports torch unless a certificate on the bundled model's real
weights runs.
"""
