"""Presets of the cookbook recipes as data, one NAME.yaml per recipe: preset name -> config values
(tinker-cookbook's production run as `cookbook`, crucible_kitchen's as `seed`). The Recipe base
class (kitchen/engine/recipe.py) reads a recipe's file by its name; this module makes the folder
a package so that its files ship with the wheel."""
