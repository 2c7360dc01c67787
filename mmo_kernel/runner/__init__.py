"""`mmo runner` (spec 12): the machine that holds the projects, dialling out to a server
and executing every tool call."""
