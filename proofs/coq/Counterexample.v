(** * thm-4.2's counterexample, checked in Coq: X = [[-5,1,1,3],[-1,1,1,-1],[3,1,1,-5]]
    (rows of mean zero, so XP = X; sigma = (3, 1, 3)), gamma = 1, beta = 0.  H1-H4 are
    computed; column 2 of X is 1_3, so the corrected theorem gives arank(LN X) = arank(X) + 1. *)

From mathcomp Require Import all_ssreflect all_algebra.
From Symtrans Require Statements LayerNorm.
Import Statements.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Definition xv (i : 'I_3) (j : 'I_4) : int :=
  nth 0 (nth [::] [:: [:: -5; 1; 1; 3]; [:: -1; 1; 1; -1]; [:: 3; 1; 1; -5]]%R i) j.
Definition wv (i : 'I_3) : int := nth 0 [:: 1; -2; 1]%R i.

Lemma xv_sum i : \sum_(j < 4) xv i j = 0.
Proof. by case: i => [[|[|[|]]]] i_lt //=; rewrite !big_ord_recl big_ord0. Qed.
Lemma xv_sq i : \sum_(j < 4) (xv i j) ^+ 2 = nth 0 [:: 36; 4; 36]%R i.
Proof. by case: i => [[|[|[|]]]] i_lt //=; rewrite !big_ord_recl big_ord0. Qed.
Lemma xv_w j : \sum_(i < 3) xv i j * wv i = 0.
Proof. by case: j => [[|[|[|[|]]]]] j_lt //=; rewrite !big_ord_recl big_ord0. Qed.
Lemma xv_col1 i : xv i 1 = 1.
Proof. by case: i => [[|[|[|]]]]. Qed.

Section CE.
Variable R : rcfType.
Definition X : 'M[R]_(3, 4) := \matrix_(i, j) (xv i j)%:~R.

Lemma X_rows : X *m (const_mx 1 : 'cV[R]_4) = 0.
Proof.
apply/matrixP => i k; rewrite !mxE.
rewrite (eq_bigr (fun j => (xv i j)%:~R)) => [|j _]; last by rewrite !mxE mulr1.
by rewrite -mulrz_sumr xv_sum mulr0z.
Qed.

Lemma XP : X *m centring R 4 = X.
Proof.
have XJ : X *m (const_mx 1 : 'M[R]_4) = 0.
  apply/matrixP => i k; have := congr1 (fun M : 'M[R]_(3, 1) => M i 0) X_rows; rewrite !mxE => e.
  by apply: etrans e; apply: eq_bigr => j _; rewrite !mxE.
by rewrite /centring mulmxBr mulmx1 -scalemxAr XJ scaler0 subr0.
Qed.

Definition sd (i : nat) : R := Num.sqrt (4%:R^-1 * (nth 0 [:: 36; 4; 36]%R i)%:~R).

Lemma row_sdE i : row_sd X i 0 = sd i.
Proof.
rewrite /row_sd mxE XP /sd; congr (Num.sqrt (_ * _)).
rewrite -xv_sq rmorph_sum /=; apply: eq_bigr => j _.
by rewrite mxE rmorphX.
Qed.

Lemma sd_gt0 (i : 'I_3) : 0 < sd i.
Proof.
rewrite sqrtr_gt0 mulr_gt0 ?invr_gt0 ?ltr0n // ltr0z.
by case: i => [[|[|[|]]]].
Qed.

Lemma sd02 : sd 2 = sd 0.
Proof. by []. Qed.

Lemma sd01 : sd 0 != sd 1.
Proof.
rewrite /sd eqr_sqrt ?mulr_ge0 ?invr_ge0 ?ler0n ?ler0z //=.
by rewrite (inj_eq (mulfI _)) ?invr_eq0 ?pnatr_eq0 // eqr_int.
Qed.

Lemma h1 : H1 X.
Proof. by move=> i; rewrite row_sdE sd_gt0. Qed.

Lemma h2 : H2 X.
Proof.
apply/negP => /submxP [D e].
have := congr1 (fun M : 'M[R]_(1, 4) => (M *m (const_mx 1 : 'cV[R]_4)) 0 0) e.
rewrite /= -mulmxA X_rows mulmx0 !mxE => /eqP.
by rewrite !big_ord_recl big_ord0 !mxE !mulr1 !addr0 (negbTE (lt0r_neq0 _)) // !addr_gt0 ?ltr01.
Qed.

Lemma h3 : H3 (const_mx 1 : 'rV[R]_4).
Proof. by move=> j; rewrite mxE oner_neq0. Qed.

Definition w : 'cV[R]_3 := \col_i (wv i)%:~R.

Lemma Xw : X^T *m w = 0.
Proof.
apply/matrixP => j k; rewrite !mxE.
rewrite (eq_bigr (fun i => (xv i j * wv i)%:~R)) => [|i _]; last by rewrite !mxE intrM.
by rewrite -mulrz_sumr xv_w mulr0z.
Qed.

Lemma sdE : row_sd X = \col_i sd i.
Proof. by apply/matrixP => i j; rewrite (ord1 j) row_sdE mxE. Qed.

Lemma h4 : H4 X.
Proof.
rewrite /H4 XP sdE; apply/negP => /submxP [D e].
have := congr1 (fun M : 'M[R]_(1, 3) => (M *m w) 0 0) e.
rewrite /= -mulmxA Xw mulmx0 !mxE !big_ord_recl big_ord0 !mxE /= sd02.
have -> : bump 0 0 = 1%N by [].
have -> : wv ord0 = 1 by [].
have -> : wv (lift ord0 ord0) = - 2%:Z by [].
have -> : wv (lift ord0 (lift ord0 ord0)) = 1 by [].
rewrite [(- _)%:~R]mulrNz -!pmulrn !mulr1n addr0 mulrN mulrnAr !mulr1 addrCA -mulr2n addrC -mulrnBl.
move/eqP; rewrite mulrn_eq0 /= subr_eq0.
by move=> h; move: sd01; rewrite h.
Qed.

Lemma ones_in : ones_in_colspace X.
Proof.
rewrite /ones_in_colspace.
have <- : row 1 X^T = (const_mx 1 : 'rV[R]_3).
  by apply/matrixP => i j; rewrite !mxE xv_col1.
exact: row_sub.
Qed.
End CE.

Theorem ln_counterexample : Statements.ln_counterexample.
Proof.
move=> R; exists (X R), (const_mx 1), 0.
have [_ _ e] := (LayerNorm.ln_corrected (X R) (const_mx 1) 0).2 (h1 R) (h2 R) (h3 R) (h4 R).
by split; [exact: h1 | exact: h2 | exact: h3 | exact: h4 | rewrite e ones_in addn1].
Qed.
