"""`symtrans check` at the command line: one-line errors, and a real run's JSON."""

import json

from symtrans.cli import main


def test_bad_input_is_one_line_and_exit_2(capsys):
    assert main(["check", "--claims", "thm-4.3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown claim 'thm-4.3'" in err and "thm-4.2" in err
    assert main(["check", "--n", "1"]) == 2
    assert "--n 1: must be at least 2" in capsys.readouterr().err
    assert main(["check", "--model", "/no/such/model"]) == 2
    assert "/no/such/model" in capsys.readouterr().err


def test_json_run_carries_records(capsys):
    assert main(["check", "--claims", "prop-5.4", "--n", "8", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n"] == 8 and len(data["weights_hash"]) == 64
    ev, nonaffine = data["evidence"]  # the Jacobian sanity record, then the counted non-affinity check
    assert nonaffine["producer"] == "global-non-affine" and nonaffine["verdict"] == "supported"
    assert ev["claim"] == "prop-5.4" and ev["verdict"] == "supported"
    assert ev["tolerance"]["reason"] and ev["margin"] is not None and ev["dtype"] == "float64"
