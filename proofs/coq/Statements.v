(** * The trusted statements of symtrans (issue 36).

    One Coq statement per all-sizes reading of the claim registry ([proofs/]),
    transcribed from the registry's formalisation; docs/certificates.md shows
    them side by side.  This file is pinned by its SHA-256 in the registry
    ([proofs/_coq.py]): [symtrans verify --coq] refuses any other text.  It
    contains definitions only: no proof, no axiom.  A proof file proves
    [Symtrans.Statements.NAME] as a theorem of the same short name NAME.

    The scalars are those of any field (so in particular of the reals) for the
    linear-algebra statements, and of any real closed field (ordered, with
    square roots of non-negative elements: the reals, the real algebraic
    numbers) for LayerNorm, whose sigma_i is a square root. *)

From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

(** ** lem-rank-sum: |rank A - rank B| <= rank(A + B) <= rank A + rank B. *)
Definition lem_rank_sum : Prop :=
  forall (F : fieldType) (m n : nat) (A B : 'M[F]_(m, n)),
    (`|(\rank A)%:Z - (\rank B)%:Z|%N <= \rank (A + B)%R <= \rank A + \rank B)%N.

(** ** prop-5.1, its all-sizes witness family: for every A of rank r < min(n, d)
    there is B with rank(A + B) = r + 1 (so the polynomial bad set
    {B : rank(A + B) <= r} is proper; that it is then Lebesgue-null is
    lem-variety, an external result). *)
Definition prop51_witness : Prop :=
  forall (F : fieldType) (n d : nat) (A : 'M[F]_(n, d)),
    (\rank A < minn n d)%N ->
    exists B : 'M[F]_(n, d), \rank (A + B)%R = (\rank A).+1.

(** ** prop-6.2/bound: multi-head attention (def-notation) with H heads of
    width d_k = k, MHA(X) = sum_h Y^h W_O^h with Y^h = A^h X W_V^h, and R_h the
    row space of Y^h W_O^h (def-Rh).  For every X (n x d_model), every n x n
    A^h (the softmax's row-stochastic matrices among them) and all weights:
    rank MHA(X) <= min(n, H d_k, d_model) and rank MHA(X) <= dim(R_1 + ... + R_H). *)
Definition mha (F : fieldType) (n d H k : nat) (A : 'I_H -> 'M[F]_n) (X : 'M[F]_(n, d))
    (WV : 'I_H -> 'M[F]_(d, k)) (WO : 'I_H -> 'M[F]_(k, d)) : 'M[F]_(n, d) :=
  \sum_(h < H) A h *m X *m WV h *m WO h.

Definition prop62_bound : Prop :=
  forall (F : fieldType) (n d H k : nat) (A : 'I_H -> 'M[F]_n) (X : 'M[F]_(n, d))
         (WV : 'I_H -> 'M[F]_(d, k)) (WO : 'I_H -> 'M[F]_(k, d)),
    (\rank (mha A X WV WO) <= minn n (minn (H * k) d))%N /\
    (\rank (mha A X WV WO) <= \rank (\sum_(h < H) <<A h *m X *m WV h *m WO h>>)%MS)%N.

(** ** prop-6.3, its all-sizes witness family: for every X (n x d_model) and
    d_k <= d_model there are W_V (d_model x d_k) and W_O (d_k x d_model) with
    W_O of rank d_k such that, for every invertible A (n x n: the attention
    matrix A^h), dim R_h = rank(A X W_V W_O) = min(rank X, d_k). *)
Definition prop63_witness : Prop :=
  forall (F : fieldType) (n d k : nat) (X : 'M[F]_(n, d)),
    (k <= d)%N ->
    exists (WV : 'M[F]_(d, k)) (WO : 'M[F]_(k, d)),
      \rank WO = k /\
      forall A : 'M[F]_n, A \in unitmx ->
        \rank (A *m X *m WV *m WO) = minn (\rank X) k.

(** ** thm-recovery/sum: the fibre of the head-summation map.

    A point of (F^{n x d_v})^H is stored as Z : 'M_(H, n * d_v) whose row h is
    mxvec Y^h (MathComp's bijection 'M_(n, d_v) <-> 'rV_(n * d_v));
    [head_sum Z] is sum_h Y^h.  [kernel f] is the kernel of the matrix of f in
    the standard bases ([lin_mx]); the statement says both that it is exactly
    the set of the Z with f Z = 0 and that its dimension is n (H - 1) d_v, the
    dimension of every non-empty fibre of the linear map. *)
Definition head_sum (F : fieldType) (n H dv : nat) (Z : 'M[F]_(H, n * dv)) : 'M[F]_(n, dv) :=
  \sum_(h < H) vec_mx (row h Z).

Definition kernel (F : fieldType) (m1 n1 m2 n2 : nat) (f : 'M[F]_(m1, n1) -> 'M[F]_(m2, n2)) :=
  kermx (lin_mx f).

Definition recovery_sum_fibre : Prop :=
  forall (F : fieldType) (n H dv : nat),
    (forall Z : 'M[F]_(H, n * dv),
        (mxvec Z <= kernel (@head_sum F n H dv))%MS <-> head_sum Z = 0) /\
    \rank (kernel (@head_sum F n H dv)) = (n * (H - 1) * dv)%N.

(** ** thm-7.3/sum: the per-head outputs cannot be told apart from their sum.

    The fibre of the head-summation map through any point Y is Y plus its
    kernel (Z is in it exactly when Z - Y is in the kernel), of dimension
    n (H - 1) d_v, which is positive as soon as n >= 1, d_v >= 1 and H >= 2. *)
Definition thm73_sum_fibre : Prop :=
  forall (F : fieldType) (n H dv : nat) (Y : 'M[F]_(H, n * dv)),
    (forall Z : 'M[F]_(H, n * dv),
        head_sum Z = head_sum Y <-> (mxvec (Z - Y) <= kernel (@head_sum F n H dv))%MS) /\
    \rank (kernel (@head_sum F n H dv)) = (n * (H - 1) * dv)%N /\
    (0 < n -> 0 < dv -> 1 < H -> 0 < \rank (kernel (@head_sum F n H dv)))%N.

(** ** thm-recovery (the W_O map, as the registry states it): the fibre of
    Z -> Z W_O on Z in F^{n x H d_v}, W_O the stacked output projection
    (H d_v x d_model), has dimension n (H d_v - rank W_O). *)
Definition recovery_wo_fibre : Prop :=
  forall (F : fieldType) (n m d : nat) (WO : 'M[F]_(m, d)),
    (forall Z : 'M[F]_(n, m),
        (mxvec Z <= kernel (fun Z : 'M[F]_(n, m) => Z *m WO))%MS <-> Z *m WO = 0) /\
    \rank (kernel (fun Z : 'M[F]_(n, m) => Z *m WO)) = (n * (m - \rank WO))%N.

(** ** LayerNorm (def-ln, §4), with the paper's eps = 0.

    P = I - (1/d) 1 1^T centres the rows; sigma_i = sqrt((1/d) sum_j (XP)_ij^2)
    is the standard deviation of row i; LN(X)_ij = (XP)_ij / sigma_i gamma_j
    + beta_j.  The affine rank (def-arank) is arank(X) = rank([X | 1_n]) - 1. *)
Section LayerNormDefs.
Variable R : rcfType.

Definition centring (d : nat) : 'M[R]_d := 1%:M - (d%:R)^-1 *: const_mx 1.

Definition row_sd (n d : nat) (X : 'M[R]_(n, d)) : 'cV[R]_n :=
  \col_i Num.sqrt ((d%:R)^-1 * \sum_j ((X *m centring d) i j) ^+ 2).

Definition layernorm (n d : nat) (X : 'M[R]_(n, d)) (gamma beta : 'rV[R]_d) : 'M[R]_(n, d) :=
  \matrix_(i, j) ((X *m centring d) i j / row_sd X i 0 * gamma 0 j + beta 0 j).

Definition arank (n d : nat) (X : 'M[R]_(n, d)) : nat :=
  (\rank (row_mx X (const_mx 1%R : 'cV[R]_n)) - 1)%N.

(** H1: every row is non-constant, sigma_i > 0. *)
Definition H1 (n d : nat) (X : 'M[R]_(n, d)) : Prop := forall i, 0 < row_sd X i 0.
(** H2: the all-ones vector 1_d is not in rowspace(X). *)
Definition H2 (n d : nat) (X : 'M[R]_(n, d)) : Prop := ~~ ((const_mx 1 : 'rV[R]_d) <= X)%MS.
(** H3: every gamma_j is non-zero. *)
Definition H3 (d : nat) (gamma : 'rV[R]_d) : Prop := forall j, gamma 0 j != 0.
(** H4: sigma is not in colspace(XP) (columns of XP: the rows of (XP)^T). *)
Definition H4 (n d : nat) (X : 'M[R]_(n, d)) : Prop :=
  ~~ ((row_sd X)^T <= (X *m centring d)^T)%MS.
(** 1_n in colspace(X). *)
Definition ones_in_colspace (n d : nat) (X : 'M[R]_(n, d)) : bool :=
  ((const_mx 1 : 'rV[R]_n) <= X^T)%MS.
End LayerNormDefs.

(** ** thm-4.2, the zero-beta matrix-rank part: under H1-H3 with beta = 0,
    rank(LN X) = rank X (H4 is not needed). *)
Definition ln_zero_beta : Prop :=
  forall (R : rcfType) (n d : nat) (X : 'M[R]_(n, d)) (gamma : 'rV[R]_d),
    H1 X -> H2 X -> H3 gamma -> \rank (layernorm X gamma 0) = \rank X.

(** ** thm-4.2, the Remark's bound: rank(LN X) <= rank X + 1 for every gamma
    and beta (H1: LN is defined). *)
Definition ln_remark : Prop :=
  forall (R : rcfType) (n d : nat) (X : 'M[R]_(n, d)) (gamma beta : 'rV[R]_d),
    H1 X -> (\rank (layernorm X gamma beta) <= (\rank X).+1)%N.

(** ** thm-4.2-corrected: under H1 and H3, for every beta,
    arank(LN X) = rank([XP | sigma]) - 1; under H1-H4,
    arank(LN X) = rank(XP) = rank(X), and arank(LN X) = arank(X) + [1_n in colspace X]. *)
Definition ln_corrected : Prop :=
  forall (R : rcfType) (n d : nat) (X : 'M[R]_(n, d)) (gamma beta : 'rV[R]_d),
    (H1 X -> H3 gamma ->
       arank (layernorm X gamma beta) = (\rank (row_mx (X *m centring R d) (row_sd X)) - 1)%N) /\
    (H1 X -> H2 X -> H3 gamma -> H4 X ->
       [/\ arank (layernorm X gamma beta) = \rank (X *m centring R d),
           \rank (X *m centring R d) = \rank X &
           arank (layernorm X gamma beta) = (arank X + ones_in_colspace X)%N]).

(** ** thm-4.2 as stated is false: in every real closed field there are X,
    gamma and beta satisfying H1-H4 with arank(LN X) = arank(X) + 1
    (ln-affine-search's counterexample, here its rational-sigma instance). *)
Definition ln_counterexample : Prop :=
  forall R : rcfType, exists (X : 'M[R]_(3, 4)) (gamma beta : 'rV[R]_4),
    [/\ H1 X, H2 X, H3 gamma, H4 X & arank (layernorm X gamma beta) = (arank X).+1].
