"""The paper's items (definitions, hypotheses, claims, literature), one module per section."""
