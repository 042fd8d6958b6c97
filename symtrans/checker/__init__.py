"""The independent certificate checker: the trusted code base of ``symtrans verify``, a package of its own.

Three modules, and nothing of the producers:

- :mod:`symtrans.checker.check`: the checks a certificate file must pass, the witness methods
  (exact ranks and minors with FLINT, Arb balls), the directory manifest and the re-check of a
  carried report record (``verify_certificate``, ``check_record``, ``manifest``);
- :mod:`symtrans.checker.statements`: the trusted statement registry, what each certificate must
  say and cover (``expected``, ``claim_statements``), and the rule drawing a statement's input ids;
- :mod:`symtrans.checker.reader`: the checker's own small reader of a model directory
  (``CheckedModel``) and the one definition of a model's ``weights_hash`` (``model_hash``).

The package sits low in the layers (docs/architecture.md): the producers' loader
(:mod:`symtrans.numeric.weights`) hashes weights with :func:`symtrans.checker.reader.model_hash`
and the forward (:mod:`symtrans.numeric.forward`) draws token ids with
:func:`symtrans.checker.statements.input_ids`, so a certificate a producer writes re-checks here;
the checker imports none of them. Of symtrans it imports only the base (``errors``, ``validate``,
``config``) and, for the ``jacobian-rank`` method, G's dimension formula (``catalogue``, ``arch``);
the import contract ``checker-trusted-code-base`` in pyproject.toml forbids everything else.

Importing this package imports none of its modules.

Examples
--------
>>> from symtrans.checker.check import verify_certificate
>>> verify_certificate([1])
(False, 'not a certificate object')
"""
