"""Memory's search, its own business: chunks and their index (index, chunking, when), the
embedders and their cache (embeddings, e5, data/), the vector tables (vectors), and hybrid
retrieval (retrieval, with conversation and relevance). Only lib.memory imports this package
(the `memory-search-inside` contract); others call lib/memory/api.py."""
