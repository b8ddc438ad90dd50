"""Analytic derivatives of the dynamics: of the RNEA (rnea_derivatives), the forward dynamics
(aba_derivatives) and gravity (gravity_derivatives), their public functions (dynamics_derivatives) and C
fronts (c_fronts), and the linearised step (linearize).
"""
