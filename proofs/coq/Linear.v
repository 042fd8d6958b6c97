(** * Proofs of the linear-algebra statements (lem-rank-sum, prop-5.1's and
    prop-6.3's witness families, prop-6.2's bound). *)

From mathcomp Require Import all_ssreflect all_algebra.
From Symtrans Require Statements.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Lemma mxrank_unitMl (F : fieldType) n p (U : 'M[F]_n) (B : 'M[F]_(n, p)) :
  U \in unitmx -> \rank (U *m B) = \rank B.
Proof.
move=> Uu; rewrite -mxrank_tr trmx_mul mxrankMfree ?mxrank_tr //.
by rewrite row_free_unit unitmx_tr.
Qed.

Lemma mxrank_unitMr (F : fieldType) m n (A : 'M[F]_(m, n)) (U : 'M[F]_n) :
  U \in unitmx -> \rank (A *m U) = \rank A.
Proof. by move=> Uu; rewrite mxrankMfree // row_free_unit. Qed.

Theorem lem_rank_sum : Statements.lem_rank_sum.
Proof.
move=> F m n A B.
have hA : (\rank A <= \rank (A + B)%R + \rank B)%N.
  by have := mxrank_add (A + B) (- B); rewrite addrK mxrank_opp; apply.
have hB : (\rank B <= \rank (A + B)%R + \rank A)%N.
  by have := mxrank_add (A + B) (- A); rewrite addrC addKr mxrank_opp; apply.
rewrite mxrank_add andbT.
case: (leqP (\rank B) (\rank A)) => h.
  by rewrite subzn // absz_nat leq_subLR addnC.
rewrite -opprB subzn ?(ltnW h) // abszN absz_nat leq_subLR addnC //.
Qed.

(** pid_mx r + delta_mx r r = pid_mx r.+1 *)
Lemma pid_mx_succ (F : fieldType) n d r (i0 : 'I_n) (j0 : 'I_d) :
  i0 = r :> nat -> j0 = r :> nat ->
  (pid_mx r : 'M[F]_(n, d)) + delta_mx i0 j0 = pid_mx r.+1.
Proof.
move=> ei ej; apply/matrixP=> i j; rewrite !mxE -!val_eqE /= ei ej.
rewrite [in RHS]ltnS [in RHS]leq_eqVlt.
case: (ltngtP i r) => [ir|ri|eir] /=.
- by rewrite addr0 andbT.
- by rewrite addr0 !andbF.
- by rewrite andbF add0r andbT eir eq_sym.
Qed.

Theorem prop51_witness : Statements.prop51_witness.
Proof.
move=> F n d A; rewrite leq_min => /andP [rn rd].
pose i0 := Ordinal rn; pose j0 := Ordinal rd.
exists (col_ebase A *m delta_mx i0 j0 *m row_ebase A).
have -> : (A + col_ebase A *m delta_mx i0 j0 *m row_ebase A =
           col_ebase A *m pid_mx (\rank A).+1 *m row_ebase A)%R.
  by rewrite -(@pid_mx_succ F n d (\rank A) i0 j0) // mulmxDr mulmxDl mulmx_ebase.
by rewrite mxrank_unitMr ?row_ebase_unit // mxrank_unitMl ?col_ebase_unit // rank_pid_mx.
Qed.

(** The rank of a sum of matrices is at most the sum of their ranks (lem-rank-sum, term by term). *)
Lemma mxrank_sum_le (F : fieldType) (m n : nat) (I : finType) (M : I -> 'M[F]_(m, n)) :
  (\rank (\sum_i M i)%R <= \sum_i \rank (M i))%N.
Proof.
elim/big_rec2: _ => [|i s S _ IH]; first by rewrite mxrank0.
have /andP [_ h] := lem_rank_sum (M i) S.
exact: leq_trans h (leq_add (leqnn _) IH).
Qed.

Theorem prop62_bound : Statements.prop62_bound.
Proof.
move=> F n d H k A X WV WO.
have sub : (Statements.mha A X WV WO <= \sum_(h < H) <<A h *m X *m WV h *m WO h>>)%MS.
  apply: summx_sub => h _; apply: (sumsmx_sup h) => //.
  by rewrite genmxE.
have rk : (\rank (Statements.mha A X WV WO) <= H * k)%N.
  apply: leq_trans (mxrank_sum_le _) _.
  have -> : (H * k = \sum_(h < H) k)%N by rewrite sum_nat_const card_ord.
  apply: leq_sum => h _.
  exact: leq_trans (mxrankM_maxr _ _) (rank_leq_row _).
split; last exact: mxrankS.
by rewrite !leq_min rank_leq_row rank_leq_col rk.
Qed.

Theorem prop63_witness : Statements.prop63_witness.
Proof.
move=> F n d k X kd.
exists (invmx (row_ebase X) *m pid_mx k), (pid_mx k); split.
  by rewrite rank_pid_mx.
move=> A Au.
have rX : (\rank X <= minn n d)%N by rewrite leq_min rank_leq_row rank_leq_col.
move: rX; rewrite leq_min => /andP [rn rd].
have eX := mulmx_ebase X; set c := col_ebase X in eX *; set rr := row_ebase X in eX *.
rewrite -[in LHS]eX !mulmxA mulmxK ?row_ebase_unit // -!mulmxA mul_pid_mx mul_pid_mx.
rewrite mxrank_unitMl // mxrank_unitMl ?col_ebase_unit // rank_pid_mx.
- rewrite !minnn; apply/minn_idPr.
  exact: leq_trans (geq_minl _ _) rd.
- by rewrite !geq_min rn !orbT.
- by rewrite !geq_min leqnn.
Qed.
