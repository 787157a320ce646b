"""The intent router: request -> plan of engine calls."""
