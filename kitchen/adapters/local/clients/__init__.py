"""The local engine's clients, what the Tinker SDK's types see: the training client and the
sampling client, the checkpoint folders they write and read, and their export as Hugging Face
folders. They run the training pass and sampling through the executor the backend picked."""
