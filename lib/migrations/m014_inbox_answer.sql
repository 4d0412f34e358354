-- m014_inbox_answer: a turn's whole answer, kept on its inbox row just before it is shown as final.
-- A turn interrupted after that (killed, shut down, or stopped for a restore, which carries inbox
-- rows over) shows this answer again instead of asking the model a second time: the person never
-- sees a complete answer streamed over, or replaced by a different one.
ALTER TABLE inbox ADD COLUMN answer TEXT;
