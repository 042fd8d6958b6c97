(** * Proofs of the LayerNorm statements (thm-4.2's zero-beta part and Remark,
    thm-4.2-corrected). *)

From mathcomp Require Import all_ssreflect all_algebra.
From Symtrans Require Statements Linear.
Import Statements.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

(** rank(A + v) = rank A + [v not in rowspace A], for a row vector v. *)
Lemma rank_adds_rV (F : fieldType) m n (A : 'M[F]_(m, n)) (v : 'rV[F]_n) :
  \rank (A + v)%MS = (\rank A + ~~ (v <= A)%MS)%N.
Proof.
case: (boolP (v <= A)%MS) => vA /=; first by rewrite addn0 (addsmx_idPl vA).
have := mxrank_sum_cap A v.
have v0 : v != 0 by apply: contraNneq vA => ->; rewrite sub0mx.
have le := mxrank_leqif_eq (capmxSr A v).
have -> : \rank (A :&: v)%MS = 0%N.
  have : (\rank (A :&: v)%MS < \rank v)%N.
    rewrite (ltn_leqif le); apply: contra vA => /andP [_ vC].
    exact: submx_trans vC (capmxSl _ _).
  by rewrite rank_rV v0 ltnS leqn0 => /eqP.
by rewrite addn0 rank_rV v0 => ->.
Qed.

Section LN.
Variable R : rcfType.
Variables n d : nat.
Implicit Types (X : 'M[R]_(n, d)) (gamma beta : 'rV[R]_d).

Notation P := (centring R d).
Notation ones_d := (const_mx 1 : 'rV[R]_d).

Lemma ker_centring : (kermx P <= ones_d)%MS.
Proof.
set K := kermx P.
have eJ : (const_mx 1 : 'M[R]_d) = (const_mx 1 : 'cV[R]_d) *m ones_d.
  by apply/matrixP => i j; rewrite !mxE big_ord1 !mxE mulr1.
have : K *m P = 0 := mulmx_ker _.
rewrite /centring mulmxBr mulmx1 => /eqP; rewrite subr_eq0 => /eqP ->.
by rewrite -scalemxAr eJ mulmxA scalemx_sub ?submxMl.
Qed.

Lemma rank_centred X : H2 X -> \rank (X *m P) = \rank X.
Proof.
move=> h2; have := mxrank_mul_ker X P.
suff -> : \rank (X :&: kermx P)%MS = 0%N by rewrite addn0.
set C := (X :&: kermx P)%MS.
have sC1 : (C <= ones_d)%MS := submx_trans (capmxSr _ _) ker_centring.
have : (\rank C < \rank ones_d)%N.
  rewrite (ltn_leqif (mxrank_leqif_eq sC1)); apply: contra h2 => /andP [_ JC].
  exact: submx_trans JC (capmxSl _ _).
by move=> lt; apply/eqP; rewrite -leqn0 -ltnS (leq_trans lt (rank_leq_row _)).
Qed.

Definition Dmx X : 'M[R]_n := diag_mx (\row_i (row_sd X i 0)^-1).

Lemma ln_decomp X gamma beta :
  layernorm X gamma beta = Dmx X *m (X *m P) *m diag_mx gamma + const_mx 1 *m beta.
Proof.
apply/matrixP => i j; rewrite mul_mx_diag mul_diag_mx /layernorm.
rewrite !mxE (big_ord_recl 0) big_ord0 addr0 !mxE mul1r.
by rewrite [_ / _]mulrC.
Qed.

Lemma Dmx_unit X : H1 X -> Dmx X \in unitmx.
Proof.
move=> h1; rewrite unitmxE det_diag unitfE; apply/prodf_neq0 => i _.
by rewrite mxE invr_eq0 lt0r_neq0.
Qed.

Lemma diag_unit gamma : H3 gamma -> diag_mx gamma \in unitmx.
Proof. by move=> h3; rewrite unitmxE det_diag unitfE; apply/prodf_neq0 => i _. Qed.

End LN.

Theorem ln_zero_beta : Statements.ln_zero_beta.
Proof.
move=> R n d X gamma h1 h2 h3.
rewrite ln_decomp mulmx0 addr0 Linear.mxrank_unitMr ?diag_unit //.
by rewrite Linear.mxrank_unitMl ?Dmx_unit // rank_centred.
Qed.

Theorem ln_remark : Statements.ln_remark.
Proof.
move=> R n d X gamma beta h1.
rewrite ln_decomp; apply: leq_trans (mxrank_add _ _) _.
rewrite -[(\rank X).+1]addn1 leq_add //.
  apply: leq_trans (mxrankM_maxl _ _) _; apply: leq_trans (mxrankM_maxr _ _) _.
  exact: mxrankM_maxl.
exact: leq_trans (mxrankM_maxl _ _) (rank_leq_col _).
Qed.

Lemma rV0_sub (F : fieldType) m p (v : 'rV[F]_p) (A : 'M[F]_(m, p)) : p = 0%N -> (v <= A)%MS.
Proof. by move=> p0; move: v A; rewrite p0 => v A; rewrite thinmx0 sub0mx. Qed.

Section Corrected.
Variable R : rcfType.
Variables n d : nat.
Implicit Types (X : 'M[R]_(n, d)) (gamma beta : 'rV[R]_d).
Notation P := (centring R d).

Lemma row_sd_D X : H1 X -> Dmx X *m row_sd X = const_mx 1.
Proof.
move=> h1; apply/matrixP => i j; rewrite mul_diag_mx (ord1 j).
have := lt0r_neq0 (h1 i); rewrite !mxE => s0.
by rewrite mulVf.
Qed.

Lemma ln_col_ops X gamma beta : H1 X -> H3 gamma ->
  \rank (row_mx (layernorm X gamma beta) (const_mx 1 : 'cV[R]_n)) = \rank (row_mx (X *m P) (row_sd X)).
Proof.
move=> h1 h3.
pose M := block_mx (diag_mx gamma) 0 beta (1%:M : 'M[R]_1).
have Mu : M \in unitmx by rewrite unitmxE det_lblock det1 mulr1 -unitmxE diag_unit.
have -> : row_mx (layernorm X gamma beta) (const_mx 1) = Dmx X *m row_mx (X *m P) (row_sd X) *m M.
  by rewrite mul_mx_row row_sd_D // mul_row_block mulmx0 add0r mulmx1 ln_decomp.
by rewrite Linear.mxrank_unitMr // Linear.mxrank_unitMl ?Dmx_unit.
Qed.

End Corrected.

Theorem ln_corrected : Statements.ln_corrected.
Proof.
move=> R n d X gamma beta; split.
  by move=> h1 h3; rewrite /arank ln_col_ops.
move=> h1 h2 h3 h4.
have h4' : ~~ ((row_sd X)^T <= (X *m centring R d)^T)%MS := h4.
have eXP : \rank (X *m centring R d) = \rank X := rank_centred h2.
have eS : \rank (row_mx (X *m centring R d) (row_sd X)) = (\rank (X *m centring R d)).+1.
  by rewrite -mxrank_tr tr_row_mx -addsmxE rank_adds_rV mxrank_tr h4' addn1.
have eA : arank (layernorm X gamma beta) = \rank (X *m centring R d).
  by rewrite /arank ln_col_ops // eS subn1.
rewrite eA; split; [by [] | exact: eXP | rewrite eXP /arank /ones_in_colspace].
rewrite -[\rank (row_mx _ _)]mxrank_tr tr_row_mx -addsmxE rank_adds_rV mxrank_tr trmx_const.
case: (boolP ((const_mx 1 : 'rV[R]_n) <= X^T)%MS) => c /=; last by rewrite addn1 subn1 addn0.
have n0 : n != 0%N.
  by apply: contra h4' => /eqP n0; exact: (rV0_sub _ _ n0).
have o0 : (const_mx 1 : 'rV[R]_n) != 0.
  apply/eqP => /matrixP/(_ 0 (Ordinal (neq0_lt0n (negbTE n0)))); rewrite !mxE => /eqP.
  by rewrite oner_eq0.
have := mxrankS c; rewrite rank_rV o0 mxrank_tr => r1.
by rewrite addn0 subn1 addn1 prednK.
Qed.
