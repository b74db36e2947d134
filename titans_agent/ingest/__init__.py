"""From files and texts to chunks: discovery (:mod:`~titans_agent.ingest.files`), format detection
(:mod:`~titans_agent.ingest.formats`), decoding, document structure, chunking, chat transcripts, and
the ingest pipeline that writes the chunks (:mod:`~titans_agent.ingest.pipeline`)."""
