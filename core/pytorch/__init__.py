"""pytorch"""
