"""Contact and impact (Featherstone Ch. 11): the arguments (args) and their checks (checks), one contact
alone (single, §11.1), the contact problem (ncp), rigid contacts' forward dynamics (forward_dynamics,
§11.3), impacts (impact, §11.5) and soft contacts (soft, §11.8).
"""
