"""The Python components of the migrating examples: a spout of a few sentences, sent once
each, reliably, and a word count bolt. Both the Python topology and the Flux file use them."""

from squall import BasicBolt, Fields, Spout


class SentenceSpout(Spout):
    """Emits each of its sentences once, with a message id, and again if it fails."""

    def __init__(self, sentences):
        self.sentences = list(sentences)

    def declare_output_fields(self, declarer):
        """One field, ``sentence``."""
        declarer.declare(Fields("sentence"))

    def open(self, conf, context, collector):
        """Nothing sent yet."""
        super().open(conf, context, collector)
        self.to_send = list(range(len(self.sentences)))
        self.pending = set()

    def next_tuple(self):
        """Send the next sentence (a failed one is sent again)."""
        if self.to_send:
            i = self.to_send.pop(0)
            self.pending.add(i)
            self.collector.emit([self.sentences[i]], i)

    def ack(self, msg_id):
        """Done with this sentence."""
        self.pending.discard(msg_id)

    def fail(self, msg_id):
        """Send it again."""
        self.to_send.append(msg_id)


class WordCount(BasicBolt):
    """Counts each word and emits ``[word, count]``."""

    def prepare(self, conf, context):
        """No word seen yet."""
        self.counts = {}

    def declare_output_fields(self, declarer):
        """``word`` and ``count``."""
        declarer.declare(Fields("word", "count"))

    def execute(self, tup, collector):
        """Count the word; send the new count."""
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        collector.emit([word, self.counts[word]])
