"""autotune"""
