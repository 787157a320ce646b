"""intents"""
