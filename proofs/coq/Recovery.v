(** * Proofs of the recovery fibres (thm-recovery): the kernels of the
    head-summation map and of Z -> Z W_O, and their dimensions. *)

From mathcomp Require Import all_ssreflect all_algebra.
From Symtrans Require Statements Linear.
Import Statements.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section Fibres.
Variable F : fieldType.

Lemma lin_mx_eq m1 n1 m2 n2 (f g : 'M[F]_(m1, n1) -> 'M[F]_(m2, n2)) :
  f =1 g -> lin_mx f = lin_mx g.
Proof. by move=> e; apply/matrixP => i j; rewrite !mxE /= e. Qed.

Lemma ker_lin_mxP m1 n1 m2 n2 (f : {linear 'M[F]_(m1, n1) -> 'M[F]_(m2, n2)}) Z :
  (mxvec Z <= kermx (lin_mx f))%MS <-> f Z = 0.
Proof.
split => [/sub_kermxP | fZ].
  by rewrite mul_vec_lin => /eqP; rewrite mxvec_eq0 => /eqP.
by apply/sub_kermxP; rewrite mul_vec_lin fZ linear0.
Qed.

(** A matrix that fixes every row vector is the identity. *)
Lemma mx_eq1 k (M : 'M[F]_k) : (forall u : 'rV_k, u *m M = u) -> M = 1%:M.
Proof. by move=> e; apply/row_matrixP => i; rewrite !rowE e mulmx1. Qed.

Lemma lin_mulmxrM n m p q (A : 'M[F]_(p, m)) (B : 'M[F]_(m, q)) :
  lin_mx (mulmxr (A *m B)) = lin_mx (mulmxr A) *m lin_mx (mulmxr B) :> 'M_(n * p, n * q).
Proof.
apply/row_matrixP => i; rewrite !rowE mulmxA !mul_rV_lin /= mxvecK.
by rewrite mulmxA.
Qed.

Lemma lin_mulmxr1 n m : lin_mx (mulmxr (1%:M : 'M[F]_m)) = 1%:M :> 'M_(n * m).
Proof. by apply: mx_eq1 => u; rewrite mul_rV_lin /= mulmx1 vec_mxK. Qed.

Lemma lin_mulmxr_unit n m (U : 'M[F]_m) : U \in unitmx -> (lin_mx (mulmxr U) : 'M_(n * m)) \in unitmx.
Proof.
move=> Uu.
have e : (lin_mx (mulmxr U) : 'M_(n * m)) *m lin_mx (mulmxr (invmx U)) = 1%:M.
  by rewrite -lin_mulmxrM mulmxV // lin_mulmxr1.
by case/mulmx1_unit: e.
Qed.

(** The core count: Z -> Z W on n-row matrices has rank n rank W. *)
Lemma rank_lin_mulmxr n m d (W : 'M[F]_(m, d)) :
  \rank (lin_mx (mulmxr W) : 'M_(n * m, n * d)) = (n * \rank W)%N.
Proof.
set r := \rank W.
have rm : (r <= m)%N := rank_leq_row W.
have rd : (r <= d)%N := rank_leq_col W.
rewrite -[in LHS](mulmx_ebase W) !lin_mulmxrM.
rewrite Linear.mxrank_unitMr ?lin_mulmxr_unit ?row_ebase_unit //.
rewrite Linear.mxrank_unitMl ?lin_mulmxr_unit ?col_ebase_unit //.
have -> : (pid_mx r : 'M[F]_(m, d)) = (pid_mx r : 'M_(m, r)) *m (pid_mx r : 'M_(r, d)).
  by rewrite mul_pid_mx !minnn.
rewrite lin_mulmxrM mxrankMfree.
  apply/eqP; rewrite eqn_leq rank_leq_col /=.
  have e1 : (lin_mx (mulmxr (pid_mx r : 'M[F]_(r, m))) : 'M_(n * r, n * m))
              *m lin_mx (mulmxr (pid_mx r : 'M[F]_(m, r))) = 1%:M.
    by rewrite -lin_mulmxrM pid_mx_id // pid_mx_1 lin_mulmxr1.
  have := mxrankM_maxr (lin_mx (mulmxr (pid_mx r : 'M[F]_(r, m))) : 'M_(n * r, n * m))
                       (lin_mx (mulmxr (pid_mx r : 'M[F]_(m, r)))).
  by rewrite e1 mxrank1.
have e2 : (lin_mx (mulmxr (pid_mx r : 'M[F]_(r, d))) : 'M_(n * r, n * d))
            *m lin_mx (mulmxr (pid_mx r : 'M[F]_(d, r))) = 1%:M.
  by rewrite -lin_mulmxrM pid_mx_id // pid_mx_1 lin_mulmxr1.
rewrite /row_free eqn_leq rank_leq_row /=.
have := mxrankM_maxl (lin_mx (mulmxr (pid_mx r : 'M[F]_(r, d))) : 'M_(n * r, n * d))
                     (lin_mx (mulmxr (pid_mx r : 'M[F]_(d, r)))).
by rewrite e2 mxrank1.
Qed.

End Fibres.

Theorem recovery_wo_fibre : Statements.recovery_wo_fibre.
Proof.
move=> F n m d WO.
have e : lin_mx (fun Z : 'M[F]_(n, m) => Z *m WO) = lin_mx (mulmxr WO) by apply: lin_mx_eq.
rewrite /kernel e; split.
  by move=> Z; rewrite (ker_lin_mxP (mulmxr_linear _ WO)).
by rewrite mxrank_ker rank_lin_mulmxr -mulnBr.
Qed.

Section HeadSum.
Variable F : fieldType.

Lemma head_sum_is_linear n H dv : linear (@head_sum F n H dv).
Proof.
move=> a Y Z; rewrite /head_sum scaler_sumr -big_split; apply: eq_bigr => h _.
by rewrite !linearP.
Qed.
Canonical head_sum_linear n H dv := Linear (@head_sum_is_linear n H dv).

(** One head's output placed in head 0, the others zero. *)
Definition place0 H' n dv (Y : 'M[F]_(n, dv)) : 'M[F]_(H'.+1, n * dv) := delta_mx 0 0 *m mxvec Y.

Lemma place0_is_linear H' n dv : linear (@place0 H' n dv).
Proof. by move=> a Y Z; rewrite /place0 linearP mulmxDr scalemxAr. Qed.
Canonical place0_linear H' n dv := Linear (@place0_is_linear H' n dv).

Lemma head_sum_place0 H' n dv (Y : 'M[F]_(n, dv)) : head_sum (place0 H' Y) = Y.
Proof.
have d1 : (delta_mx 0 0 : 'M[F]_1) = 1%:M by apply/matrixP => i j; rewrite !ord1 !mxE.
rewrite /head_sum (bigD1 0) //= big1 => [|h h0]; last first.
  by rewrite /place0 row_mul rowE mul_delta_mx_cond (negbTE h0) mulr0n mul0mx linear0.
by rewrite addr0 /place0 row_mul rowE mul_delta_mx_cond eqxx mulr1n d1 mul1mx mxvecK.
Qed.

End HeadSum.

(** The kernel of the head-summation map and its dimension, shared by the two
    linked theorems below (neither uses the other: the registry derives
    thm-recovery from thm-7.3, not the reverse). *)
Lemma head_sum_kerP (F : fieldType) n H dv (Z : 'M[F]_(H, n * dv)) :
  (mxvec Z <= kernel (@head_sum F n H dv))%MS <-> head_sum Z = 0.
Proof. by rewrite /kernel (ker_lin_mxP (head_sum_linear F n H dv)). Qed.

Lemma head_sum_ker_rank (F : fieldType) n H dv :
  \rank (kernel (@head_sum F n H dv)) = (n * (H - 1) * dv)%N.
Proof.
rewrite /kernel mxrank_ker; case: H => [|H'].
  have -> : \rank (lin_mx (@head_sum F n 0 dv)) = 0%N.
    by apply/eqP; rewrite -leqn0 (leq_trans (rank_leq_row _)) // mul0n.
  by rewrite mul0n !sub0n muln0 mul0n.
have r : \rank (lin_mx (@head_sum F n H'.+1 dv)) = (n * dv)%N.
  apply/eqP; rewrite eqn_leq rank_leq_col /=.
  have e : lin_mx (@place0 F H' n dv) *m lin_mx (@head_sum F n H'.+1 dv) = 1%:M.
    by apply: mx_eq1 => u; rewrite mulmxA !mul_rV_lin /= mxvecK head_sum_place0 vec_mxK.
  have := mxrankM_maxr (lin_mx (@place0 F H' n dv)) (lin_mx (@head_sum F n H'.+1 dv)).
  by rewrite e mxrank1.
by rewrite r mulSn addKn subn1 /= mulnCA mulnA.
Qed.

Theorem recovery_sum_fibre : Statements.recovery_sum_fibre.
Proof. by move=> F n H dv; split; [exact: head_sum_kerP | exact: head_sum_ker_rank]. Qed.

Theorem thm73_sum_fibre : Statements.thm73_sum_fibre.
Proof.
move=> F n H dv Y; split; last split; first 2 last.
- by move=> n0 d0 H1; rewrite head_sum_ker_rank !muln_gt0 n0 d0 subn_gt0 H1.
- move=> Z; rewrite head_sum_kerP linearB /=.
  by split => [->|/eqP]; [rewrite subrr | rewrite subr_eq0 => /eqP].
- exact: head_sum_ker_rank.
Qed.
