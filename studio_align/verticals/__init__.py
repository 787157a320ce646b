"""verticals"""
