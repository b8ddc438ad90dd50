"""Estimation from measurements: the inertial-parameter regressor (regressor, regressor_batch), payload
identification (payload) and the momentum observer of external torques (observer).
"""
