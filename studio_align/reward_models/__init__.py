"""reward_models"""
