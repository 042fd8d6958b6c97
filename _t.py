import traceback, sys
from symtrans.evidence import Context, producers_for
fam = sys.argv[1]
ctx = Context(model=f"/tmp/dec_ckpt/{fam}", n=16)
for claim in ["thm-5.3","prop-5.4","cor-mlp-role","prop-6.3","pgop","cor-dff"]:
    for p in producers_for(claim):
        if p.kind != "numeric" and not p.needs_model: continue
        try:
            ev = p.func(ctx)
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)
            print(claim, p.name, type(e).__name__, e, [f"{f.filename.split('/')[-1]}:{f.lineno}" for f in tb[-3:]])
